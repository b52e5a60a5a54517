"""Encoders, poolers and auxiliary heads."""
