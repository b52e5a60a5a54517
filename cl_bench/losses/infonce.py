"""InfoNCE over in-batch negatives (SimCSE Eq. 4/5): the one implementation used everywhere."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def cosine_logits(a: torch.Tensor, b: torch.Tensor, tau: float) -> torch.Tensor:
    """Pairwise cosine similarity of rows of ``a`` (N, D) and ``b`` (M, D), divided by ``tau``."""
    if tau <= 0:
        raise ValueError(f"loss.tau must be > 0, got {tau}")
    return F.normalize(a.float(), dim=-1) @ F.normalize(b.float(), dim=-1).T / tau


def info_nce(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    tau: float = 0.05,
    hard_negative_alpha: float = 1.0,
) -> torch.Tensor:
    """One-sided InfoNCE: anchor i must pick positive i among all positives (and hard negatives).

    ``loss = -mean_i log( e^{s(i,i)/tau} / (sum_j e^{s(i,j)/tau} + sum_j alpha^{[i=j]} e^{s(i,j-)/tau}) )``

    Args:
        anchors: (N, D) anchor embeddings.
        positives: (N, D) positive embeddings; row i is the positive of anchor i, the others
            are its in-batch negatives.
        hard_negatives: optional (N, D); all of them are extra negatives for every anchor
            (supervised SimCSE, Eq. 5).
        tau: temperature (> 0).
        hard_negative_alpha: the paper's weight alpha on an anchor's *own* hard negative (Table 7;
            1 = unweighted). SimCSE's code takes ``log(alpha)`` as ``--hard_negative_weight``.

    Returns:
        Scalar loss (float32), computed with log-sum-exp (no overflow at small tau).
    """
    logits = cosine_logits(anchors, positives, tau)
    if hard_negatives is not None:
        hard = cosine_logits(anchors, hard_negatives, tau)
        if hard_negative_alpha != 1.0:
            bias = math.log(hard_negative_alpha) if hard_negative_alpha > 0 else float("-inf")
            hard = hard + torch.diag(torch.full((hard.shape[0],), bias, device=hard.device))
        logits = torch.cat([logits, hard], dim=1)
    labels = torch.arange(anchors.shape[0], device=anchors.device)
    return F.cross_entropy(logits, labels)
