"""Barlow Twins (Zbontar et al., ICML 2021): the cross-correlation of two views to the identity.

``C = BN(z1)ᵀ BN(z2) / N`` with BN the per-dimension standardisation over the batch (the official
code's ``nn.BatchNorm1d(affine=False)``: biased variance, ε = 1e-5), then

``L = Σ_i (1 − C_ii)² + λ Σ_i Σ_{j≠i} C_ij²``.

No negatives, no temperature: the projector that precedes it lives in the method
(:mod:`cl_bench.methods.barlow_twins`).
"""

from __future__ import annotations

import torch

from cl_bench.losses.similarity import working_precision

#: BatchNorm1d's default epsilon (the official code's normaliser)
BATCH_NORM_EPS = 1e-5


def standardize(z: torch.Tensor, eps: float = BATCH_NORM_EPS) -> torch.Tensor:
    """Per-dimension ``(z − mean) / sqrt(var + eps)`` over the batch (biased variance, like BatchNorm)."""
    z = working_precision(z)
    mean = z.mean(dim=0, keepdim=True)
    var = (z - mean).pow(2).mean(dim=0, keepdim=True)
    return (z - mean) / torch.sqrt(var + eps)


def cross_correlation(z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    """(D, D) cross-correlation of the standardised views (batch-averaged)."""
    if z1.shape != z2.shape:
        raise ValueError(f"the two views must have the same shape, got {tuple(z1.shape)} and {tuple(z2.shape)}")
    if z1.shape[0] < 2:
        raise ValueError("Barlow Twins needs a batch of at least 2 (it standardises over the batch)")
    return standardize(z1).T @ standardize(z2) / z1.shape[0]


def barlow_twins(z1: torch.Tensor, z2: torch.Tensor, *, lambd: float) -> torch.Tensor:
    """Barlow Twins' redundancy-reduction loss of two views.

    Args:
        z1: (N, D) projections of the first view.
        z2: (N, D) projections of the second view (row i is the same sentence).
        lambd: λ, the weight of the off-diagonal terms (paper: 5e-3; official code: 0.0051).

    Returns:
        Scalar loss (at least float32).
    """
    c = cross_correlation(z1, z2)
    diagonal = torch.diagonal(c)
    on_diagonal = (1.0 - diagonal).pow(2).sum()
    off_diagonal = c.pow(2).sum() - diagonal.pow(2).sum()
    return on_diagonal + lambd * off_diagonal
