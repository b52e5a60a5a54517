"""Multi-class N-pair loss (Sohn, 2016): one positive against N-1 negatives, inner products."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from cl_bench.losses.similarity import contrast_pairs, dot_logits, multi_positive_nce, working_precision


def npair(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
    l2_reg: float,
) -> torch.Tensor:
    """``mean_(i,p) log(1 + sum_{n in N(i)} exp((f_i.f_n - f_i.f_p)/tau)) + l2_reg * mean_i(|f_i|^2 + |f_i+|^2)``.

    Scores are raw inner products (no normalisation), as in Sohn (2016), whose loss is the
    ``tau = 1`` case; the embedding-norm penalty (λ = 0.002 there) keeps inner products bounded.

    Args:
        anchors: (N, D) anchors f_i.
        positives: (N, D) positives f_i+ (row i pairs with anchor i).
        hard_negatives: optional (K, D) extra negatives of every anchor.
        labels: optional (N,) classes; equal labels make positive pairs.
        tau: temperature dividing the inner products (> 0; 1 = Sohn's loss).
        l2_reg: weight λ of the squared-norm penalty on anchors and positives (>= 0).

    Returns:
        Scalar loss.
    """
    pairs = contrast_pairs(anchors, positives, hard_negatives, labels)
    logits = dot_logits(pairs.rows, pairs.columns, tau)
    norms = working_precision(anchors).pow(2).sum(-1) + working_precision(positives).pow(2).sum(-1)
    return multi_positive_nce(logits, pairs.positive, pairs.negative) + l2_reg * norms.mean()
