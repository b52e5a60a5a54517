"""CoSENT (Su, 2022; https://github.com/bojone/CoSENT, ``cosent.py``): a ranking loss over the cosines of
scored pairs.

For every two pairs ``i``, ``j`` whose gold scores are ordered ``s_i < s_j``, the pair ``i`` should have the
smaller cosine::

    loss = log(1 + Σ_{(i, j): s_i < s_j} exp(λ (cos_i − cos_j)))

with λ = 20 as the reference code (``* 20``). Only the order of the scores matters, so SBERT's
score/5 scaling changes nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import masked_logsumexp, working_precision


def ranking_logsumexp(values: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """``log(1 + Σ_{s_i < s_j} exp(values_i − values_j))``: CoSENT's ranking term over (N,) per-pair values.

    The 1 is the ``0`` the reference code prepends before its log-sum-exp; pairs with equal scores
    are not compared.
    """
    scores = scores.to(values.device)
    discordant = scores[:, None] < scores[None, :]  # (i, j) with s_i < s_j
    differences = values[:, None] - values[None, :]
    total = masked_logsumexp(differences.reshape(-1), discordant.reshape(-1), dim=0)
    return torch.logaddexp(torch.zeros_like(total), total)


def pair_cosines(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine of ``u`` and ``v`` (N,), in at least float32."""
    return (F.normalize(working_precision(u), dim=-1) * F.normalize(working_precision(v), dim=-1)).sum(-1)


def cosent(u: torch.Tensor, v: torch.Tensor, scores: torch.Tensor, *, scale: float) -> torch.Tensor:
    """CoSENT: ``log(1 + Σ_{s_i < s_j} exp(scale · (cos(u_i, v_i) − cos(u_j, v_j))))``.

    Args:
        u: (N, D) first sentences of the pairs.
        v: (N, D) second sentences.
        scores: (N,) gold similarity (any monotone scale; only the order is used).
        scale: λ (the reference code: 20).
    """
    if u.shape != v.shape or u.ndim != 2 or scores.shape != (u.shape[0],):
        raise ValueError(f"loss: cosent needs u, v (N, D) and scores (N,), got {tuple(u.shape)}, {tuple(v.shape)}, "
                         f"{tuple(scores.shape)}")
    return ranking_logsumexp(pair_cosines(u, v) * scale, scores)
