"""BYOL (Grill et al., NeurIPS 2020): the online network predicts the target network's projection.

``ℓ(p, t) = ‖p/‖p‖ − t/‖t‖‖² = 2 − 2·cos(p, t)`` per sample, and the symmetric loss of the paper
(Eq. 2–3) sums both directions: the prediction of view 1 against the target projection of view 2,
and the prediction of view 2 against the target projection of view 1, each averaged over the batch.
No negatives. The predictor and the momentum target network live in the method
(:mod:`cl_bench.methods.byol`); the targets it passes carry no gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import working_precision


def normalized_mse(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over rows of ``‖p̄ − t̄‖² = 2 − 2 cos(p, t)`` (rows L2-normalised)."""
    p = F.normalize(working_precision(predictions), dim=-1)
    t = F.normalize(working_precision(targets), dim=-1)
    return (p - t).pow(2).sum(dim=-1).mean()


def byol(
    predictions_1: torch.Tensor,
    predictions_2: torch.Tensor,
    targets_1: torch.Tensor,
    targets_2: torch.Tensor,
) -> torch.Tensor:
    """BYOL's symmetric loss ``ℓ(q1, z'2) + ℓ(q2, z'1)``.

    Args:
        predictions_1: (N, D) online predictions of view 1 (``q_θ(z_θ)``).
        predictions_2: (N, D) online predictions of view 2.
        targets_1: (N, D) target projections of view 1 (``z'_ξ``; detached by the method).
        targets_2: (N, D) target projections of view 2.

    Returns:
        Scalar loss in [0, 8].
    """
    shapes = {tuple(t.shape) for t in (predictions_1, predictions_2, targets_1, targets_2)}
    if len(shapes) != 1:
        raise ValueError(f"BYOL's predictions and targets must have one shape, got {sorted(shapes)}")
    return normalized_mse(predictions_1, targets_2) + normalized_mse(predictions_2, targets_1)
