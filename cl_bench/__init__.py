"""cl-bench: train, ablate and compare contrastive sentence-embedding methods."""

__version__ = "0.1.0"
