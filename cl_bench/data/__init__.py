"""Data readers: each turns one file format into text (sentences, pairs, documents)."""
