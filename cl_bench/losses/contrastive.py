"""Contrastive loss with a margin over pairs (Chopra, Hadsell & LeCun, 2005). Ignores temperature."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from cl_bench.losses.similarity import contrast_pairs, distances, squared_distances


def contrastive(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    margin: float,
    normalize: bool,
) -> torch.Tensor:
    """Pull positive pairs together, push negative pairs beyond ``margin``.

    For every (anchor, candidate) pair:
    ``1[y_i = y_j] d_ij^2 + 1[y_i != y_j] max(0, margin - d_ij)^2``, averaged over all pairs, where
    d is the Euclidean distance and the candidates are all positives (and hard negatives).

    Args:
        anchors: (N, D) anchors.
        positives: (N, D) positives (row i pairs with anchor i).
        hard_negatives: optional (K, D) extra negatives of every anchor.
        labels: optional (N,) classes; equal labels make positive pairs.
        margin: the distance ε beyond which negatives cost nothing (> 0).
        normalize: L2-normalise embeddings first (distances in [0, 2]).

    Returns:
        Scalar loss.
    """
    pairs = contrast_pairs(anchors, positives, hard_negatives, labels)
    sq = squared_distances(pairs.rows, pairs.columns, normalize)
    hinge = (margin - distances(pairs.rows, pairs.columns, normalize)).clamp_min(0.0).pow(2)
    per_pair = torch.where(pairs.positive, sq, hinge)
    return per_pair[pairs.positive | pairs.negative].mean()
