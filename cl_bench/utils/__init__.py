"""Leaf utilities every layer may use: override parsing, torchrun/DDP, the optimiser, run folders, interrupts, caches."""
