"""View generators: text-level augmentations (seeded) and embedding-level cutoffs."""
