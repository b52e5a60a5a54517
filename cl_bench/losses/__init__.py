"""Contrastive objectives as pure tensor functions (no model, no config, no state)."""
