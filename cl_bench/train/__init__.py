"""The training loop (method-agnostic)."""
