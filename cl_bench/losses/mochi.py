"""MoCHi (Kalantidis et al., NeurIPS 2020): hard negatives mixed inside a MoCo queue.

For each query ``q`` (L2-normalised) the queue's negatives are ranked by ``q·n`` and the N hardest
kept (``Q̃^N``). Then (Section 4):

* ``s`` synthetic negatives ``h = h̃/‖h̃‖``, ``h̃ = α n_i + (1 − α) n_j``, with ``n_i, n_j`` drawn from
  ``Q̃^N`` and ``α ~ U(0, 1)``;
* ``s′`` harder ones mixing the query itself: ``h′ = h̃′/‖h̃′‖``, ``h̃′ = β q + (1 − β) n_j``,
  ``n_j ∈ Q̃^N``, ``β ~ U(0, 0.5)`` (so the query's share stays below one half).

They are extra negatives of their own query only, and carry no gradient (the paper mixes
detached features). :func:`mix_hard_negatives` is pure: the randomness comes from ``generator``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import working_precision


@torch.no_grad()
def mix_hard_negatives(
    queries: torch.Tensor,
    queue: torch.Tensor,
    *,
    num_hardest: int,
    num_synthetic: int,
    num_query_mixed: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Synthetic hard negatives of every query: (B, s + s′, D), L2-normalised, no gradient.

    Args:
        queries: (B, D) query embeddings (normalised here).
        queue: (K, D) negative keys (normalised here).
        num_hardest: N, how many of the closest queue entries are mixed (paper: 1024 of 16k–65k).
        num_synthetic: s, negatives mixed from two hard negatives (paper: 128 or 256).
        num_query_mixed: s′, negatives mixed from the query and one hard negative (paper: 16–128).
        generator: the RNG of the pair choices and mixing coefficients (None: torch's global RNG).

    Returns:
        Rows ``[:s]`` are the synthetic negatives, rows ``[s:]`` the query-mixed ones.
    """
    if num_hardest < 1 or num_hardest > queue.shape[0]:
        raise ValueError(f"method.mochi_hardest: must be between 1 and the queue size {queue.shape[0]}, got {num_hardest}")
    if num_synthetic < 0 or num_query_mixed < 0:
        raise ValueError(
            f"method.mochi_synthetic and method.mochi_query_mixed: must be >= 0, got {num_synthetic}, {num_query_mixed}"
        )
    q = F.normalize(working_precision(queries).detach(), dim=-1)
    negatives = F.normalize(working_precision(queue).detach(), dim=-1)
    batch, device = q.shape[0], q.device
    hardest = (q @ negatives.T).topk(num_hardest, dim=1).indices  # (B, N), most similar first
    hard = negatives[hardest]  # (B, N, D)

    def draw(count: int) -> torch.Tensor:
        return torch.randint(num_hardest, (batch, count), generator=generator, device="cpu").to(device)

    def pick(index: torch.Tensor) -> torch.Tensor:
        return hard.gather(1, index[..., None].expand(-1, -1, hard.shape[-1]))

    alpha = torch.rand(batch, num_synthetic, 1, generator=generator, dtype=q.dtype).to(device)
    synthetic = alpha * pick(draw(num_synthetic)) + (1 - alpha) * pick(draw(num_synthetic))
    beta = 0.5 * torch.rand(batch, num_query_mixed, 1, generator=generator, dtype=q.dtype).to(device)
    query_mixed = beta * q[:, None, :] + (1 - beta) * pick(draw(num_query_mixed))
    return F.normalize(torch.cat([synthetic, query_mixed], dim=1), dim=-1)
