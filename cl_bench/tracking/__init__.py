"""Experiment tracking: plain dicts to MLflow and to the run directory. Knows no method."""
