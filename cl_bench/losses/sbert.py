"""Sentence-BERT's supervised objectives (Reimers & Gurevych, EMNLP 2019, Section 3).

* Classification (NLI): ``o = softmax(W_t [u; v; |u − v|])`` trained with cross-entropy; the
  classifier ``W_t`` lives in the method, which passes its logits (:func:`pair_features` builds
  the concatenation).
* Regression (STS-B): the cosine of ``u`` and ``v`` regressed on the gold score with mean squared
  error; SBERT scales the 0–5 STS-B score to [0, 1] (the method does).
* Triplet: ``max(‖s_a − s_p‖ − ‖s_a − s_n‖ + ε, 0)`` with the Euclidean distance and ε = 1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import working_precision


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """SBERT's classifier input ``[u; v; |u − v|]`` (N, 3D)."""
    return torch.cat([u, v, (u - v).abs()], dim=-1)


def sbert_softmax(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the classifier's (N, C) logits against (N,) integer labels."""
    return F.cross_entropy(working_precision(logits), labels)


def sbert_regression(u: torch.Tensor, v: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Mean squared error between ``cos(u_i, v_i)`` and ``scores_i`` (gold similarity in [0, 1])."""
    u, v = working_precision(u), working_precision(v)
    cosine = F.cosine_similarity(u, v, dim=-1)
    return F.mse_loss(cosine, scores.to(cosine.dtype))


def euclidean(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise Euclidean distance (gradient 0, not NaN, where the rows coincide)."""
    sq = (a - b).pow(2).sum(-1)
    positive = sq > 0
    return torch.where(positive, torch.where(positive, sq, torch.ones_like(sq)).sqrt(), torch.zeros_like(sq))


def sbert_triplet(
    anchors: torch.Tensor, positives: torch.Tensor, negatives: torch.Tensor, *, margin: float
) -> torch.Tensor:
    """``mean_i max(‖a_i − p_i‖ − ‖a_i − n_i‖ + margin, 0)``, Euclidean, unnormalised (SBERT: margin 1).

    Args:
        anchors: (N, D) anchor sentence embeddings.
        positives: (N, D) their positives.
        negatives: (N, D) their negatives (one per anchor, given: no mining).
        margin: ε (SBERT: 1).
    """
    a, p, n = (working_precision(x) for x in (anchors, positives, negatives))
    return (euclidean(a, p) - euclidean(a, n) + margin).clamp_min(0.0).mean()
