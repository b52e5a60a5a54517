"""Soft nearest-neighbour loss (Frosst, Papernot & Hinton, 2019): several positives per point."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from cl_bench.losses.similarity import (
    check_inputs,
    masked_logsumexp,
    pair_labels,
    squared_distances,
)


def snn(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
    normalize: bool,
) -> torch.Tensor:
    """``-1/B sum_i log( sum_{j != i, y_j = y_i} e^{-|x_i - x_j|^2/tau} / sum_{k != i} e^{-|x_i - x_k|^2/tau} )``.

    The points are all 2N views (plus the hard negatives, which carry labels of their own and so
    are only ever in denominators). Without labels the two views of a sample share a label;
    with labels every view of an equal-label sample is a positive. The sum runs over the points
    that have at least one positive (all 2N views).

    Args:
        anchors: (N, D) first views.
        positives: (N, D) second views.
        hard_negatives: optional (K, D) extra points of no class.
        labels: optional (N,) classes.
        tau: temperature T (> 0). On L2-normalised points ``|x_i - x_j|^2 = 2 - 2 cos``, so
            ``tau = 0.1`` weighs cosines like InfoNCE at 0.05.
        normalize: L2-normalise points first.

    Returns:
        Scalar loss.
    """
    check_inputs(anchors, positives, hard_negatives)
    n = anchors.shape[0]
    label = pair_labels(n, labels, anchors.device)
    points, point_labels = torch.cat([anchors, positives]), label.repeat(2)
    if hard_negatives is not None and hard_negatives.shape[0] > 0:
        k = hard_negatives.shape[0]
        points = torch.cat([points, hard_negatives])
        # Fresh labels that no view has: hard negatives are never anyone's neighbour of the same class.
        fresh = point_labels.max() + 1 + torch.arange(k, device=anchors.device)
        point_labels = torch.cat([point_labels, fresh])
    logits = -squared_distances(points, points, normalize) / tau
    not_self = ~torch.eye(points.shape[0], dtype=torch.bool, device=points.device)
    same = (point_labels[:, None] == point_labels[None, :]) & not_self
    has_positive = same.any(dim=1)
    per_point = masked_logsumexp(logits, not_self, dim=1) - masked_logsumexp(logits, same, dim=1)
    return per_point[has_positive].mean()
