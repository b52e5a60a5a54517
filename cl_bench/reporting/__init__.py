"""cl-bench-report's work: tables, plots and comparisons read from finished runs (pandas, scipy, MLflow)."""
