"""Lifted structured loss, smooth version (Song et al., 2016). Ignores temperature."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from cl_bench.losses.similarity import contrast_pairs, distances, masked_logsumexp


def lifted(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    margin: float,
    normalize: bool,
) -> torch.Tensor:
    """``1/(2|P|) sum_{(i,j) in P} max(0, J_ij)^2`` with
    ``J_ij = D_ij + log( sum_{(i,k) in N} e^{margin - D_ik} + sum_{(l,j) in N} e^{margin - D_lj} )``.

    Pairs are (anchor, candidate) pairs of the two-view batch: the negatives of anchor i are its
    negative candidates (row i), the negatives of candidate j are the anchors it is a negative of
    (column j). D is the Euclidean distance.

    Args:
        anchors: (N, D) anchors.
        positives: (N, D) positives (row i pairs with anchor i).
        hard_negatives: optional (K, D) extra negatives of every anchor.
        labels: optional (N,) classes; equal labels make positive pairs.
        margin: ε (> 0; Song et al. use 1).
        normalize: L2-normalise embeddings first.

    Returns:
        Scalar loss.
    """
    pairs = contrast_pairs(anchors, positives, hard_negatives, labels)
    dist = distances(pairs.rows, pairs.columns, normalize)
    slack = margin - dist
    from_row = masked_logsumexp(slack, pairs.negative, dim=1)[:, None]  # negatives of anchor i
    from_column = masked_logsumexp(slack, pairs.negative, dim=0)[None, :]  # negatives of candidate j
    j_ij = dist + torch.logaddexp(from_row, from_column)
    return j_ij[pairs.positive].clamp_min(0.0).pow(2).sum() / (2 * pairs.positive.sum())
