"""Supervised contrastive loss (Khosla et al., 2020), the L_out form: several positives per anchor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from cl_bench.losses.similarity import contrast_pairs, cosine_logits, masked_logsumexp
from cl_bench.losses.specs import ContrastMode


def supcon(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
    contrast_mode: Literal["all", "one"],
) -> torch.Tensor:
    """``mean_i -1/|P(i)| sum_{p in P(i)} log( e^{s_ip/tau} / sum_{a in A(i)} e^{s_ia/tau} )``.

    A(i) is every view except i itself (both views of the batch and the hard negatives); P(i)
    the views in A(i) with i's label. Other positives stay in the denominator (unlike
    ``info_nce`` with labels). Without labels only the two views of a sample share a label, and
    the loss is NT-Xent (``contrast_mode=all``).

    Args:
        anchors: (N, D) first views.
        positives: (N, D) second views.
        hard_negatives: optional (K, D) extra negatives (in every A(i), in no P(i)).
        labels: optional (N,) classes (NLI labels, SentEval classes).
        tau: temperature (> 0; Khosla et al. use 0.1).
        contrast_mode: ``all`` = every view is an anchor; ``one`` = only the first views are.

    Returns:
        Scalar loss (mean over anchors that have a positive).
    """
    if contrast_mode not in list(ContrastMode):
        raise ValueError(
            f"loss.contrast_mode: must be one of {', '.join(ContrastMode)}, got '{contrast_mode}'"
        )
    pairs = contrast_pairs(
        anchors,
        positives,
        hard_negatives,
        labels,
        rows="both" if contrast_mode == "all" else "anchors",
        columns="both",
    )
    logits = cosine_logits(pairs.rows, pairs.columns, tau)
    log_denominator = masked_logsumexp(logits, pairs.positive | pairs.negative, dim=1)
    log_prob = logits - log_denominator[:, None]
    num_pos = pairs.positive.sum(dim=1)
    mean_log_prob_pos = log_prob.masked_fill(~pairs.positive, 0.0).sum(dim=1) / num_pos.clamp_min(1)
    return -mean_log_prob_pos[num_pos > 0].mean()
