"""The entry points (cl-bench, cl-bench-report, cl-bench-export, Hydra's sweep callback) and what a run does around
training: provenance, the docs' reference pages. The top layer: no other module imports it but ``__main__``."""
