"""SNCSE's objective (Wang et al. 2022, Sense-GVT/SNCSE ``simcse/models.py`` ``cl_forward``): InfoNCE over
the two views plus the bidirectional margin loss (BML) on each sentence's soft negative (its negation).

``loss = InfoNCE(z1, z2; tau) + lambda * mean_i [ relu(d_i + alpha) + relu(-d_i - beta) ]``,
``d_i = cos(z1_i, z3_i) - cos(z1_i, z2_i)``: the soft negative should be less similar to the anchor than
the positive is, by a margin in ``[alpha, beta]`` (the official BERT values: alpha 0.1, beta 0.3,
lambda 1e-3; RoBERTa 5e-4).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cl_bench.losses.infonce import info_nce


def bidirectional_margin(
    anchors: torch.Tensor, positives: torch.Tensor, soft_negatives: torch.Tensor, *, alpha: float, beta: float
) -> torch.Tensor:
    """SNCSE's BML term: ``mean_i relu(d_i + alpha) + relu(-d_i - beta)``, ``d_i = cos(a_i, s_i) - cos(a_i, p_i)``."""
    a, p, s = (x.float() if x.dtype in (torch.float16, torch.bfloat16) else x for x in (anchors, positives, soft_negatives))
    difference = F.cosine_similarity(a, s, dim=1) - F.cosine_similarity(a, p, dim=1)
    return (torch.relu(difference + alpha) + torch.relu(-difference - beta)).mean()


def sncse_loss(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    soft_negatives: torch.Tensor,
    *,
    tau: float,
    alpha: float,
    beta: float,
    bml_weight: float,
) -> torch.Tensor:
    """InfoNCE(anchors, positives) + ``bml_weight`` · BML(anchors, positives, soft_negatives).

    Args:
        anchors: (N, D) first views.
        positives: (N, D) second views (row i is anchor i's positive, the others its negatives).
        soft_negatives: (N, D) row i is anchor i's soft negative (its negated sentence); it is no
            in-batch negative of InfoNCE (the official code leaves it out of the softmax).
        tau: InfoNCE temperature.
        alpha: lower margin (the soft negative at least ``alpha`` below the positive).
        beta: upper margin (at most ``beta`` below).
        bml_weight: lambda.
    """
    contrastive = info_nce(anchors, positives, tau=tau, hard_negative_alpha=1.0)  # no hard negatives: alpha unused
    return contrastive + bml_weight * bidirectional_margin(anchors, positives, soft_negatives, alpha=alpha, beta=beta)
