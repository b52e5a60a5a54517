"""InfoNCE over in-batch negatives (SimCSE Eq. 4/5): the one-sided form every method uses."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from cl_bench.losses.similarity import contrast_pairs, cosine_logits, multi_positive_nce

__all__ = ["cosine_logits", "info_nce"]


def info_nce(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
    hard_negative_alpha: float,
    ignore: torch.Tensor | None = None,
) -> torch.Tensor:
    """One-sided InfoNCE: anchor i must pick positive i among all positives (and hard negatives).

    ``loss = -mean_i log( e^{s(i,i)/tau} / (sum_j e^{s(i,j)/tau} + sum_j alpha^{[i=j]} e^{s(i,j-)/tau}) )``

    Args:
        anchors: (N, D) anchor embeddings.
        positives: (N, D) positive embeddings; row i is the positive of anchor i, the others
            are its in-batch negatives.
        hard_negatives: optional (K, D); all of them are extra negatives for every anchor
            (supervised SimCSE, Eq. 5). ``hard_negative_alpha != 1`` needs K = N.
        labels: optional (N,) classes; positives j with ``labels[j] == labels[i]`` are all positives
            of anchor i, each scored against i's negatives only (mean over positive pairs).
        tau: temperature (> 0).
        hard_negative_alpha: the paper's weight alpha on an anchor's *own* hard negative (Table 7;
            1 = unweighted, 0 = drop it). SimCSE's code takes ``log(alpha)`` as ``--hard_negative_weight``.
        ignore: optional (N, N + K) bool, columns left out of each anchor's denominator (GISTEmbed's guided
            mask, :func:`cl_bench.losses.gist.guided_ignore_mask`); the positive itself cannot be ignored.

    Returns:
        Scalar loss (at least float32), computed with log-sum-exp (no overflow at small tau).
    """
    pairs = contrast_pairs(anchors, positives, hard_negatives, labels)
    logits = cosine_logits(pairs.rows, pairs.columns, tau)
    negative = pairs.negative
    if ignore is not None:
        if ignore.shape != negative.shape:
            raise ValueError(f"loss: ignore must be {tuple(negative.shape)} (anchors x candidates), got {tuple(ignore.shape)}")
        negative = negative & ~ignore.to(negative.device)
    if hard_negatives is not None and hard_negative_alpha != 1.0:
        n = pairs.num_pairs
        if hard_negatives.shape[0] != n:
            raise ValueError(
                f"loss.hard_negative_alpha needs one hard negative per anchor ({n}), got {hard_negatives.shape[0]}"
            )
        own = torch.zeros_like(negative)
        own[:, n:] = torch.eye(n, dtype=torch.bool, device=own.device)
        if hard_negative_alpha == 0:
            negative = negative & ~own  # alpha = 0 removes the term (its log weight is -inf)
        else:
            logits = logits + own.to(logits.dtype) * math.log(hard_negative_alpha)
    return multi_positive_nce(logits, pairs.positive, negative)
