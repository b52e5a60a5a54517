"""Triplet loss with a margin (Schroff et al., FaceNet 2015). Ignores temperature."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from cl_bench.losses.similarity import contrast_pairs, squared_distances
from cl_bench.losses.specs import Mining


def triplet(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    margin: float,
    mining: Literal["hardest", "random"],
    normalize: bool,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``mean_(i,p) max(0, ||f(x_i) - f(x_p)||^2 - ||f(x_i) - f(x_n(i))||^2 + margin)``.

    Each anchor gets one in-batch negative n(i) among its negatives (the other positives and the
    hard negatives): the closest one (``hardest``, batch-hard mining) or one drawn uniformly
    (``random``). Every positive pair of the anchor forms a triplet with it.

    Args:
        anchors: (N, D) anchors.
        positives: (N, D) positives (row i pairs with anchor i).
        hard_negatives: optional (K, D) extra negatives of every anchor.
        labels: optional (N,) classes; equal labels make positive pairs.
        margin: ε, the gap asked between negative and positive squared distances (> 0; FaceNet 0.2).
        mining: ``hardest`` or ``random`` in-batch negative.
        normalize: L2-normalise embeddings first (FaceNet's unit hypersphere).
        generator: RNG for ``random`` mining (None = torch's global RNG, seeded by the run).

    Returns:
        Scalar loss (mean over positive pairs whose anchor has a negative; 0 if none has).
    """
    if mining not in list(Mining):
        raise ValueError(f"loss.mining: must be one of {', '.join(Mining)}, got '{mining}'")
    pairs = contrast_pairs(anchors, positives, hard_negatives, labels)
    sq = squared_distances(pairs.rows, pairs.columns, normalize)
    has_negative = pairs.negative.any(dim=1)
    if mining == "hardest":
        negative_sq = sq.masked_fill(~pairs.negative, torch.finfo(sq.dtype).max).min(dim=1).values
    else:
        weights = pairs.negative.float().cpu()
        weights[~has_negative.cpu()] = 1.0  # rows without negatives are dropped below
        chosen = torch.multinomial(weights, 1, generator=generator).squeeze(1).to(sq.device)
        negative_sq = sq.gather(1, chosen[:, None]).squeeze(1)
    per_pair = (sq - negative_sq[:, None] + margin).clamp_min(0.0)
    valid = pairs.positive & has_negative[:, None]
    if not valid.any():
        return sq.sum() * 0.0
    return per_pair[valid].mean()
