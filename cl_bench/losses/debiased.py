"""Debiased contrastive loss (Chuang et al., 2020): correct the negatives for false negatives.

Negatives drawn from the data contain same-class samples with prior probability τ⁺. The loss
replaces the negative term ``sum_n e^{s_n/t}`` by the estimate
``N g = max( (sum_n e^{s_n/t} - τ⁺ N mean_v e^{s_v/t}) / (1 - τ⁺), N e^{-1/t} )``,
where v ranges over the anchor's positives and the clamp at ``e^{-1/t}`` (the smallest value of
``e^{cos/t}``) keeps the estimate positive. :mod:`cl_bench.losses.hard_negative` reweights the
negatives on top of this.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import contrast_pairs, cosine_logits, masked_logsumexp


def debiased_estimate_loss(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None,
    labels: torch.Tensor | Sequence[int] | None,
    tau: float,
    tau_plus: float,
    beta: float,
    symmetric: bool,
) -> torch.Tensor:
    """Mean over positive pairs (i, p) of ``-log( e^{l_ip} / (e^{l_ip} + N_i g_i) )``, in log space.

    The body of :func:`debiased` (β = 0) and :func:`cl_bench.losses.hard_negative.hard_negative`.

    Args:
        anchors, positives, hard_negatives, labels: the views, as the losses take them.
        tau: the temperature (also for the clamp ``N e^{-1/tau}``).
        tau_plus: class prior τ⁺ in [0, 1); 0 = no debiasing.
        beta: hardness concentration β >= 0 (0 = uniform weights over negatives).
        symmetric: every view is an anchor against the other 2N-1; False = one-sided.

    Returns:
        Scalar loss; a row without negatives contributes 0.
    """
    side = "both" if symmetric else None
    pairs = contrast_pairs(
        anchors, positives, hard_negatives, labels, rows=side or "anchors", columns=side or "positives"
    )
    logits = cosine_logits(pairs.rows, pairs.columns, tau)
    positive, negative = pairs.positive, pairs.negative
    num_neg = negative.sum(dim=1).to(logits.dtype)
    num_pos = positive.sum(dim=1).to(logits.dtype)
    has_neg = num_neg > 0
    safe_num_neg = num_neg.clamp_min(1.0)
    # log of the (reweighted) negative sum: N * sum_n w_n e^{l_n}, w = softmax(beta * l) over negatives.
    log_neg = masked_logsumexp((1.0 + beta) * logits, negative, dim=1)
    if beta != 0.0:
        log_neg = log_neg - masked_logsumexp(beta * logits, negative, dim=1) + torch.log(safe_num_neg)
    if tau_plus > 0.0:
        log_pos_mean = masked_logsumexp(logits, positive, dim=1) - torch.log(num_pos.clamp_min(1.0))
        log_correction = log_pos_mean + math.log(tau_plus) + torch.log(safe_num_neg)
        top = torch.maximum(log_neg, log_correction)
        scaled = torch.exp(log_neg - top) - torch.exp(log_correction - top)
        above = scaled > 0
        log_diff = torch.where(
            above,
            top + torch.log(torch.where(above, scaled, torch.ones_like(scaled))) - math.log(1.0 - tau_plus),
            torch.full_like(scaled, torch.finfo(logits.dtype).min),
        )
    else:
        log_diff = log_neg
    log_floor = torch.log(safe_num_neg) - 1.0 / tau
    log_ng = torch.maximum(log_diff, log_floor)
    per_pair = F.softplus(log_ng[:, None] - logits)  # -log(e^l / (e^l + Ng))
    per_pair = torch.where(has_neg[:, None], per_pair, torch.zeros_like(per_pair))
    return per_pair[positive].mean()


def debiased(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
    tau_plus: float,
    symmetric: bool,
) -> torch.Tensor:
    """Debiased contrastive loss on cosine similarities.

    Args:
        anchors: (N, D) anchors.
        positives: (N, D) positives (row i pairs with anchor i).
        hard_negatives: optional (K, D) extra negatives of every anchor.
        labels: optional (N,) classes; all equal-label views are positives v of the anchor
            (each scored in turn, the mean over them enters the correction).
        tau: temperature t (> 0).
        tau_plus: class prior τ⁺ in [0, 1) (0 = plain InfoNCE with the e^{-1/t} clamp).
        symmetric: every view is an anchor against the other 2N-1 (2N-2 negatives), as in the
            authors' SimCLR code; False = one-sided like SimCSE (N-1 negatives).

    Returns:
        Scalar loss.
    """
    return debiased_estimate_loss(anchors, positives, hard_negatives, labels, tau, tau_plus, 0.0, symmetric)
