"""promptbert: its spec (configuration.py, torch-free) and its nn.Module (modeling.py); this file imports nothing, so importing the spec loads no torch."""
