"""Noise-contrastive estimation (Gutmann & Hyvärinen, 2010) with in-batch noise samples.

Each positive pair is a "data" sample; the anchor's in-batch negatives are its k "noise" samples,
drawn from a noise distribution q. A logistic classifier tells them apart with the logit
``l(x, y) = s(x, y)/tau - log(k q(y))``, i.e. the log-ratio of the unnormalised model density
``exp(s/tau)`` to k times the noise density.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import contrast_pairs, cosine_logits


def nce(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
    noise_prob: float | None,
) -> torch.Tensor:
    """Binary NCE: ``-mean_(i,p) [ log σ(l_ip) + sum_{n in N(i)} log(1 - σ(l_in)) ]``.

    Args:
        anchors: (N, D) anchors.
        positives: (N, D) positives (row i pairs with anchor i).
        hard_negatives: optional (K, D) extra noise samples of every anchor.
        labels: optional (N,) classes; equal labels are data pairs, the rest noise.
        tau: temperature (> 0) of the model score ``s/tau`` (cosine similarity s).
        noise_prob: probability q that the noise distribution gives each noise sample;
            None = uniform over the C candidates of the batch (q = 1/C).

    Returns:
        Scalar loss (mean over positive pairs). An anchor without noise samples only has its
        data term, which is then exactly 0 (σ(+inf) = 1).
    """
    pairs = contrast_pairs(anchors, positives, hard_negatives, labels)
    logits = cosine_logits(pairs.rows, pairs.columns, tau)
    num_noise = pairs.negative.sum(dim=1, keepdim=True)  # k of each anchor
    has_noise = num_noise > 0
    q = noise_prob if noise_prob is not None else 1.0 / pairs.columns.shape[0]
    log_kq = torch.log(num_noise.clamp_min(1).to(logits.dtype)) + math.log(q)
    ratio_logits = logits - log_kq
    data_term = torch.where(has_noise, F.logsigmoid(ratio_logits), torch.zeros_like(logits))
    noise_term = F.logsigmoid(-ratio_logits).masked_fill(~pairs.negative, 0.0).sum(dim=1, keepdim=True)
    per_pair = -(data_term + noise_term)
    return per_pair.expand_as(logits)[pairs.positive].mean()
