"""The one similarity / temperature / pair-structure code path shared by every loss.

Every loss takes ``anchors (N, D)``, ``positives (N, D)``, optional ``hard_negatives (K, D)`` and
optional ``labels (N,)``. :func:`contrast_pairs` turns these into one structure: rows (the anchors
that are scored), columns (the candidates they are scored against) and two disjoint boolean masks,
``positive`` and ``negative`` (a pair that is neither, e.g. an embedding with itself, is ignored).

* Without labels, the pair structure defines positives: anchor ``i`` and positive ``i`` are the
  two views of one sample.
* With labels, embeddings whose samples share a label are positives (supervised contrastive
  learning; NLI labels or SentEval classes). Anchor ``i`` and positive ``i`` carry ``labels[i]``.
* Hard negatives are negatives of every row and never positives.

All exponentials go through log-sum-exp, so temperatures down to 1e-4 neither overflow nor
produce NaN gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

Rows = Literal["anchors", "both"]
Columns = Literal["positives", "both"]


def working_precision(x: torch.Tensor) -> torch.Tensor:
    """Losses are computed in at least float32 (fp16/bf16 embeddings are upcast; float64 is kept)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def cosine_similarity_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row of ``a`` (N, D) with every row of ``b`` (M, D): (N, M)."""
    return F.normalize(working_precision(a), dim=-1) @ F.normalize(working_precision(b), dim=-1).T


def cosine_logits(a: torch.Tensor, b: torch.Tensor, tau: float) -> torch.Tensor:
    """Pairwise cosine similarity of rows of ``a`` (N, D) and ``b`` (M, D), divided by ``tau``."""
    return cosine_similarity_matrix(a, b) / tau


def dot_logits(a: torch.Tensor, b: torch.Tensor, tau: float) -> torch.Tensor:
    """Pairwise inner products of rows of ``a`` and ``b`` (no normalisation), divided by ``tau``."""
    return working_precision(a) @ working_precision(b).T / tau


def squared_distances(a: torch.Tensor, b: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Squared Euclidean distances between rows of ``a`` and ``b``: (N, M), never negative.

    Args:
        a: (N, D) embeddings.
        b: (M, D) embeddings.
        normalize: L2-normalise the rows first (distances then lie in [0, 4] and equal ``2 - 2 cos``).
    """
    if normalize:
        return (2.0 - 2.0 * cosine_similarity_matrix(a, b)).clamp_min(0.0)
    a, b = working_precision(a), working_precision(b)
    # The expansion avoids an (N, M, D) difference tensor; clamping removes rounding below zero.
    sq = a.pow(2).sum(-1, keepdim=True) + b.pow(2).sum(-1).unsqueeze(0) - 2.0 * a @ b.T
    return sq.clamp_min(0.0)


def distances(a: torch.Tensor, b: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """Euclidean distances between rows of ``a`` and ``b`` (gradient 0, not NaN, at distance 0)."""
    sq = squared_distances(a, b, normalize)
    positive = sq > 0
    return torch.where(positive, torch.where(positive, sq, torch.ones_like(sq)).sqrt(), torch.zeros_like(sq))


def masked_logsumexp(x: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """``log(sum(exp(x[mask])))`` along ``dim``.

    Where ``mask`` selects nothing the result is the most negative finite float (an "empty sum"
    that keeps every later ``logaddexp`` and gradient finite; it contributes exactly nothing).
    Masked-out entries receive no gradient.
    """
    return torch.logsumexp(x.masked_fill(~mask, torch.finfo(x.dtype).min), dim=dim)


def pair_labels(n: int, labels: torch.Tensor | Sequence[int] | None, device: torch.device) -> torch.Tensor:
    """The (N,) label of each anchor/positive pair: ``labels`` if given, else ``0..N-1``.

    Raises:
        ValueError: when ``labels`` does not hold exactly one integer label per pair.
    """
    if labels is None:
        return torch.arange(n, device=device)
    labels = torch.as_tensor(labels, device=device)
    if labels.shape != (n,):
        raise ValueError(f"labels: expected one label per anchor, shape ({n},), got {tuple(labels.shape)}")
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(f"labels: expected integer class labels, got dtype {labels.dtype}")
    return labels.long()


@dataclass(frozen=True)
class ContrastPairs:
    """Rows scored against columns, with which (row, column) pairs are positives or negatives.

    Attributes:
        rows: (R, D) embeddings that act as anchors.
        columns: (C, D) candidate embeddings.
        positive: (R, C) bool, pairs that should be similar.
        negative: (R, C) bool, pairs that should be dissimilar (disjoint from ``positive``).
        num_pairs: N, the number of anchor/positive pairs in the batch.
    """

    rows: torch.Tensor
    columns: torch.Tensor
    positive: torch.Tensor
    negative: torch.Tensor
    num_pairs: int


def check_inputs(anchors: torch.Tensor, positives: torch.Tensor, hard_negatives: torch.Tensor | None) -> None:
    """One-line errors for mismatched shapes (anchors and positives (N, D), hard negatives (K, D))."""
    if anchors.ndim != 2 or anchors.shape != positives.shape:
        raise ValueError(
            f"loss: anchors and positives must both be (N, D), got {tuple(anchors.shape)} and {tuple(positives.shape)}"
        )
    if anchors.shape[0] < 1:
        raise ValueError("loss: empty batch (N = 0)")
    if hard_negatives is not None and (
        hard_negatives.ndim != 2 or hard_negatives.shape[1] != anchors.shape[1]
    ):
        raise ValueError(
            f"loss: hard_negatives must be (K, {anchors.shape[1]}), got {tuple(hard_negatives.shape)}"
        )


def contrast_pairs(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    labels: torch.Tensor | Sequence[int] | None = None,
    *,
    rows: Rows = "anchors",
    columns: Columns = "positives",
) -> ContrastPairs:
    """Build the pair structure of a two-view batch.

    Args:
        anchors: (N, D) first views.
        positives: (N, D) second views; row i pairs with anchor i.
        hard_negatives: optional (K, D) extra negatives of every row.
        labels: optional (N,) class of each pair; equal labels make positives.
        rows: ``anchors`` (one-sided, SimCSE) or ``both`` (every view is an anchor, SimCLR).
        columns: ``positives`` (the other view only) or ``both`` (both views; an embedding is
            never paired with itself).

    Returns:
        The :class:`ContrastPairs`; hard negatives are the last K columns.
    """
    check_inputs(anchors, positives, hard_negatives)
    n = anchors.shape[0]
    device = anchors.device
    label = pair_labels(n, labels, device)
    # Each physical embedding has an id (anchors 0..N-1, positives N..2N-1) to exclude self-pairs.
    ids_a, ids_p = torch.arange(n, device=device), torch.arange(n, 2 * n, device=device)
    row_emb, row_lab, row_ids = (
        (anchors, label, ids_a)
        if rows == "anchors"
        else (torch.cat([anchors, positives]), label.repeat(2), torch.cat([ids_a, ids_p]))
    )
    col_emb, col_lab, col_ids = (
        (positives, label, ids_p)
        if columns == "positives"
        else (torch.cat([anchors, positives]), label.repeat(2), torch.cat([ids_a, ids_p]))
    )
    same = row_lab[:, None] == col_lab[None, :]
    not_self = row_ids[:, None] != col_ids[None, :]
    positive, negative = same & not_self, ~same & not_self
    if hard_negatives is not None and hard_negatives.shape[0] > 0:
        k = hard_negatives.shape[0]
        col_emb = torch.cat([col_emb, hard_negatives])
        positive = torch.cat([positive, positive.new_zeros(positive.shape[0], k)], dim=1)
        negative = torch.cat([negative, negative.new_ones(negative.shape[0], k)], dim=1)
    return ContrastPairs(row_emb, col_emb, positive, negative, n)


def multi_positive_nce(logits: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    """InfoNCE over positive pairs: mean over (i, p) of ``-log(e^{l_ip} / (e^{l_ip} + sum_n e^{l_in}))``.

    The sum runs over the negatives of row i only, so other positives of the same row are neither
    in the numerator nor in the denominator. With one positive per row this is the usual
    cross-entropy over the row.
    """
    negatives = masked_logsumexp(logits, negative, dim=1).unsqueeze(1)
    per_pair = torch.logaddexp(logits, negatives) - logits
    return per_pair[positive].mean()
