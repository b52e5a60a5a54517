"""Hard-negative-weighted contrastive loss (Robinson et al., ICLR 2021).

Negatives are importance-weighted by ``e^{β s_n/t}`` (β concentrates the weight on negatives
close to the anchor), then debiased as in :mod:`cl_bench.losses.debiased`:
``N g = max( (N sum_n w_n e^{s_n/t} - τ⁺ N mean_v e^{s_v/t}) / (1 - τ⁺), N e^{-1/t} )`` with
``w = softmax(β s/t)`` over the negatives.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from cl_bench.losses.debiased import debiased_estimate_loss


def hard_negative(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
    beta: float,
    tau_plus: float,
    symmetric: bool,
) -> torch.Tensor:
    """Hard-negative sampling loss (β = 0 gives the debiased loss, β = τ⁺ = 0 InfoNCE + clamp).

    Args:
        anchors: (N, D) anchors.
        positives: (N, D) positives (row i pairs with anchor i).
        hard_negatives: optional (K, D) extra negatives of every anchor.
        labels: optional (N,) classes; equal labels make positives.
        tau: temperature t (> 0).
        beta: concentration β >= 0 of the hardness weights.
        tau_plus: class prior τ⁺ in [0, 1) for the debiasing correction.
        symmetric: all 2N views as anchors (2N-2 negatives, the authors' SimCLR setting).

    Returns:
        Scalar loss.
    """
    return debiased_estimate_loss(anchors, positives, hard_negatives, labels, tau, tau_plus, beta, symmetric)
