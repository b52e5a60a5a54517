"""NT-Xent (SimCLR, Chen et al. 2020): symmetric InfoNCE with 2N-2 in-batch negatives."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from cl_bench.losses.similarity import contrast_pairs, cosine_logits, multi_positive_nce


def ntxent(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
) -> torch.Tensor:
    """Normalised temperature-scaled cross-entropy over both views.

    All 2N views are anchors; each is scored against the other 2N-1 views (never itself), so
    its partner is the positive and the remaining 2N-2 views are negatives:
    ``loss = mean_k -log( e^{s(k,k')/tau} / (e^{s(k,k')/tau} + sum_{m != k,k'} e^{s(k,m)/tau}) )``.

    Args:
        anchors: (N, D) first views.
        positives: (N, D) second views.
        hard_negatives: optional (K, D) extra negatives of every view.
        labels: optional (N,) classes; views of equal label are all positives, each scored
            against the view's negatives only (mean over positive pairs).
        tau: temperature (> 0).

    Returns:
        Scalar loss.
    """
    pairs = contrast_pairs(anchors, positives, hard_negatives, labels, rows="both", columns="both")
    logits = cosine_logits(pairs.rows, pairs.columns, tau)
    return multi_positive_nce(logits, pairs.positive, pairs.negative)
