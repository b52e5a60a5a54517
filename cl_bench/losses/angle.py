"""AnglE (Li & Li, ACL 2024, "AnglE-optimized Text Embeddings"; https://github.com/SeanLee97/AnglE,
``angle_emb/loss.py`` and ``AngleLoss`` in ``angle_emb/angle.py``).

The objective is a weighted sum of three terms, each with its own scale (the code's ``*_tau``: a
multiplier, not a divisor):

* **cosine** (``cosine_w``, ``cosine_tau``): CoSENT over the pairs' cosines (:mod:`cl_bench.losses.cosent`);
* **in-batch negatives** (``ibn_w``, ``ibn_tau``): the 2N sentences of the N pairs are scored against each
  other (cosine × ``ibn_tau``, self excluded); a sentence must pick its targets (cross-entropy summed over them):
  its partner when its pair's label truncates to a nonzero integer, plus the code's label-multiplied extra
  targets (:func:`in_batch_targets`); a sentence of a pair labelled below 1 has none and adds 0 (it still counts
  in the mean). The labels are taken on the scale they come in, as the code does: AnglE's STS-B example feeds the
  raw 0–5 scores (``method.score_max=5``), SBERT's scale [0, 1] makes only pairs scored 5 positives;
* **angle** (``angle_w``, ``angle_tau``): each embedding is split into a real and an imaginary half,
  ``z = a + bi``; for a pair ``(z1, z2)`` the code computes ``Δ = (a·c + b·d, b·c − a·d) / (‖z1‖ ‖z2‖)``
  element-wise (z1 = a + bi, z2 = c + di: the complex quotient z1/z2 rescaled by ‖z2‖/‖z1‖ with the norms
  taken over the whole half-vectors) and ranks ``|Σ Δ| · angle_tau`` with CoSENT's log-sum-exp.

``angle`` (kind ``scored_pair``) is the code's data format A (text1, text2, score). ``angle_nli`` (kind
``triplet``) is its format C (query, positive, negative): ``(ibn_w · CE(q → positives) + cln_w · CE(q →
positives ∪ negatives)) / 2`` with scale ``ibn_tau``, plus the angle and cosine terms over the pairs
(q, positive) labelled 1 and (q, negative) labelled 0. Defaults are ``angle_emb.angle_trainer``'s CLI
defaults (cosine_w 0, ibn_w 1, cln_w 1, angle_w 0.02, every tau 20, pooling ``sum``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cl_bench.losses.cosent import pair_cosines, ranking_logsumexp
from cl_bench.losses.similarity import working_precision


def angle_differences(u: torch.Tensor, v: torch.Tensor, pooling: str) -> torch.Tensor:
    """The pooled angle difference ``|reduce(Δ)|`` of each pair (N,), Δ as in the module docstring.

    Raises:
        ValueError: an odd embedding width (no real/imaginary halves).
    """
    if u.shape[-1] % 2:
        raise ValueError(f"loss: the angle term splits embeddings into two halves; width {u.shape[-1]} is odd")
    a, b = working_precision(u).chunk(2, dim=1)
    c, d = working_precision(v).chunk(2, dim=1)
    norms = (a.pow(2) + b.pow(2)).sum(1, keepdim=True).sqrt() * (c.pow(2) + d.pow(2)).sum(1, keepdim=True).sqrt()
    delta = torch.cat([a * c + b * d, b * c - a * d], dim=1) / norms
    if pooling == "sum":
        pooled = delta.sum(1)
    elif pooling == "mean":
        pooled = delta.mean(1)
    else:  # a value the spec's AnglePooling does not hold (composition rejects it; a Python caller may pass one)
        raise ValueError(f"loss.angle_pooling: unknown '{pooling}'; valid: sum, mean")
    return pooled.abs()


def in_batch_targets(labels: torch.Tensor) -> torch.Tensor:
    """AnglE's in-batch targets (``in_batch_negative_loss``'s ``make_target_matrix``), (2N, 2N) bool over the
    zigzag sentences ``[u_0, v_0, u_1, v_1, …]``.

    With ``y`` the pair's label truncated to an integer (the code's ``y_true.int()`` of its float32 labels) and
    ``partner(r)`` the other sentence of r's pair, sentence ``j`` is a target of row ``r`` when both labels are
    nonzero and ``j · y_j == partner(r) · y_r``: the partner always, and, with labels above 1, every other ``j``
    whose index times label happens to equal it (AnglE's STS-B example feeds the raw 0–5 scores, so such extra
    targets occur); a row whose label truncates to 0 has none.
    """
    y = labels.to(torch.float32).to(torch.int64).repeat_interleave(2)
    rows = torch.arange(y.shape[0], device=labels.device)
    partner = rows + 1 - 2 * (rows % 2)  # zigzag: 0↔1, 2↔3, …
    column_key = torch.where(y != 0, rows * y, torch.full_like(y, -2))
    row_key = torch.where(y != 0, partner * y, torch.full_like(y, -1))
    return row_key.unsqueeze(1) == column_key.unsqueeze(0)


def in_batch_negatives(u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor, scale: float) -> torch.Tensor:
    """AnglE's in-batch term: mean over the 2N sentences of ``−Σ_j target(r, j) · log softmax_j(scale · cos(x_r, x_j))``
    (:func:`in_batch_targets`; ``j`` runs over all 2N sentences but ``r``; a row without targets adds 0)."""
    x = F.normalize(torch.stack([working_precision(u), working_precision(v)], dim=1).reshape(-1, u.shape[1]), dim=1)
    n2 = x.shape[0]
    logits = (x @ x.T * scale).masked_fill(torch.eye(n2, dtype=torch.bool, device=x.device), float("-inf"))
    log_probs = logits.log_softmax(dim=1)
    targets = in_batch_targets(labels.to(x.device))
    return -torch.where(targets, log_probs, torch.zeros_like(log_probs)).sum() / n2


def angle(
    u: torch.Tensor,
    v: torch.Tensor,
    scores: torch.Tensor,
    *,
    cosine_w: float,
    ibn_w: float,
    angle_w: float,
    cosine_tau: float,
    ibn_tau: float,
    angle_tau: float,
    angle_pooling: str,
) -> torch.Tensor:
    """AnglE on scored pairs (the code's format A): ``cosine_w · CoSENT + ibn_w · in-batch + angle_w · angle``.

    Args:
        u, v: (N, D) the pairs' sentences (D even for the angle term).
        scores: (N,) the pairs' labels, on the scale the data gives them (``method.score_max``: STS-B's 0–5 gold
            score rescaled to [0, score_max]; AnglE's STS-B example: the raw 0–5). The cosine and angle terms read
            only their order; the in-batch term builds its targets from them as the code does
            (:func:`in_batch_targets`): with scores in [0, 1] only a 1 makes a positive, with raw 0–5 every pair
            scored >= 1 does, and labels >= 2 add extra targets.
        cosine_w, ibn_w, angle_w: the terms' weights (>= 0; a zero weight skips its term).
        cosine_tau, ibn_tau, angle_tau: the terms' scales (> 0).
        angle_pooling: ``sum`` or ``mean`` of the element-wise angle differences.
    """
    if u.shape != v.shape or u.ndim != 2 or scores.shape != (u.shape[0],):
        raise ValueError(f"loss: angle needs u, v (N, D) and scores (N,), got {tuple(u.shape)}, {tuple(v.shape)}, "
                         f"{tuple(scores.shape)}")
    loss = torch.zeros((), dtype=working_precision(u).dtype, device=u.device)
    if cosine_w > 0:
        loss = loss + cosine_w * ranking_logsumexp(pair_cosines(u, v) * cosine_tau, scores)
    if ibn_w > 0:
        loss = loss + ibn_w * in_batch_negatives(u, v, scores, ibn_tau)
    if angle_w > 0:
        loss = loss + angle_w * ranking_logsumexp(angle_differences(u, v, angle_pooling) * angle_tau, scores)
    return loss


def _cross_entropy_first_match(queries: torch.Tensor, targets: torch.Tensor, scale: float) -> torch.Tensor:
    """``CE(scale · cos(q_i, targets), i)``: query i must pick target i (the code's ``contrastive_with_negative_loss``)."""
    logits = F.normalize(working_precision(queries), dim=1) @ F.normalize(working_precision(targets), dim=1).T * scale
    return F.cross_entropy(logits, torch.arange(queries.shape[0], device=queries.device))


def angle_nli(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor,
    *,
    cosine_w: float,
    ibn_w: float,
    cln_w: float,
    angle_w: float,
    cosine_tau: float,
    ibn_tau: float,
    angle_tau: float,
    angle_pooling: str,
) -> torch.Tensor:
    """AnglE on (query, positive, negative) rows (the code's format C).

    ``(ibn_w · CE(q → p) + cln_w · CE(q → p ∪ n)) / 2 + angle_w · angle + cosine_w · CoSENT``, the last two over
    the 2N pairs ``(q_i, p_i)`` scored 1 and ``(q_i, n_i)`` scored 0.

    Args:
        anchors, positives, negatives: (N, D) each.
        cln_w: weight of the term with the negatives among the candidates; the other keys as :func:`angle`.
    """
    if not anchors.shape == positives.shape == negatives.shape or anchors.ndim != 2:
        raise ValueError(f"loss: angle_nli needs three (N, D) tensors, got {tuple(anchors.shape)}, "
                         f"{tuple(positives.shape)}, {tuple(negatives.shape)}")
    loss = torch.zeros((), dtype=working_precision(anchors).dtype, device=anchors.device)
    if ibn_w > 0:
        loss = loss + ibn_w * _cross_entropy_first_match(anchors, positives, ibn_tau) / 2
    if cln_w > 0:
        loss = loss + cln_w * _cross_entropy_first_match(anchors, torch.cat([positives, negatives]), ibn_tau) / 2
    u, v = torch.cat([anchors, anchors]), torch.cat([positives, negatives])
    scores = torch.cat([anchors.new_ones(anchors.shape[0]), anchors.new_zeros(anchors.shape[0])])
    if angle_w > 0:
        loss = loss + angle_w * ranking_logsumexp(angle_differences(u, v, angle_pooling) * angle_tau, scores)
    if cosine_w > 0:
        loss = loss + cosine_w * ranking_logsumexp(pair_cosines(u, v) * cosine_tau, scores)
    return loss
