"""Contrastive objectives as pure tensor functions (no model, no config, no state).

Each ``loss=`` option is one module here with one function
``loss(anchors, positives, hard_negatives=None, *, labels=None, <hyperparameters>) -> scalar``;
all of them go through :mod:`cl_bench.losses.similarity` for similarities, temperature and the
positive/negative pair structure.
"""
