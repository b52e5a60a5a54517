"""QuickThoughts' neighbour classification (Logeswaran & Lee, ICLR 2018), as a ``loss=`` option.

Every input sentence scores every candidate of its contiguous batch; the targets spread mass 1
evenly over its neighbours; the loss is softmax cross-entropy over the batch with the sentence
itself excluded. ``similarity: dot`` is the paper's ``f(s)ᵀg(c)`` (no temperature);
``similarity: cosine`` divides cosine similarities by ``tau`` (for encoders whose raw dot products
are large). S2V sets the self score to 0, which leaves an e^0 term in the denominator; here the
self score is removed from the softmax.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import cosine_logits, dot_logits
from cl_bench.losses.specs import Similarity


def neighbour_scores(inputs: torch.Tensor, candidates: torch.Tensor, similarity: str, tau: float | None) -> torch.Tensor:
    """(B, B) scores of every (input, candidate) pair."""
    if similarity == "cosine":
        return cosine_logits(inputs, candidates, tau)
    if similarity == "dot":
        return dot_logits(inputs, candidates, 1.0)
    raise ValueError(f"loss.similarity: unknown similarity '{similarity}'; valid: {', '.join(Similarity)}")


def neighbour_classification(
    inputs: torch.Tensor,
    candidates: torch.Tensor,
    targets: torch.Tensor,
    *,
    similarity: str,
    tau: float | None,
) -> torch.Tensor:
    """Softmax cross-entropy with soft targets over each input's candidates, the diagonal excluded.

    Args:
        inputs: (B, D) f(s_i).
        candidates: (B, D) g(s_j).
        targets: (B, B) rows summing to 1, zero on the diagonal.
        similarity: ``dot`` (the paper) or ``cosine`` (divided by ``tau``).
        tau: temperature of ``cosine`` (unused by ``dot``).

    Returns:
        Mean over rows of ``-sum_j t_ij log softmax_{j != i}(scores_i)_j`` (float32).
    """
    scores = neighbour_scores(inputs, candidates, similarity, tau)
    diagonal = torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    log_probs = F.log_softmax(scores.float().masked_fill(diagonal, float("-inf")), dim=1)
    # 0 · (−inf) on the diagonal would be NaN: the diagonal carries no target mass, drop it.
    return -(targets * log_probs.masked_fill(diagonal, 0.0)).sum(dim=1).mean()
