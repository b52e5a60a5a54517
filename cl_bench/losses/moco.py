"""MoCo's InfoNCE over one positive key and a queue of negative keys (He et al. 2019, Eq. 1).

Unlike :func:`cl_bench.losses.infonce.info_nce`, the other queries' keys in the batch are *not*
negatives: each query sees exactly its own key and the K queued keys (MoCo's ``l_pos``/``l_neg``).
The similarity is the shared :func:`~cl_bench.losses.similarity.cosine_logits`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import cosine_logits


def queue_logits(
    queries: torch.Tensor,
    keys: torch.Tensor,
    queue: torch.Tensor,
    tau: float,
    extra_negatives: torch.Tensor | None = None,
) -> torch.Tensor:
    """(N, 1 + K [+ S]) logits: column 0 is ``s(q_i, k_i)/tau``, columns 1..K are ``s(q_i, queue_j)/tau``.

    Args:
        queries: (N, D) query embeddings (gradients flow through them).
        keys: (N, D) positive keys, row i for query i (from the momentum encoder, no gradient).
        queue: (K, D) negative keys.
        tau: temperature (> 0).
        extra_negatives: optional (N, S, D) negatives of each query only (MoCHi's synthetic ones,
            :func:`cl_bench.losses.mochi.mix_hard_negatives`), appended as columns K+1..K+S.
    """
    if keys.shape != queries.shape:
        raise ValueError(
            f"queries {tuple(queries.shape)} and keys {tuple(keys.shape)} must have the same shape"
        )
    if queue.shape[-1] != queries.shape[-1]:
        raise ValueError(f"queue width {queue.shape[-1]} differs from the query width {queries.shape[-1]}")
    # The (N, N) matrix is cheap at MoCo's batch sizes and keeps one similarity code path.
    positive = torch.diagonal(cosine_logits(queries, keys, tau)).unsqueeze(1)
    negative = cosine_logits(queries, queue.detach(), tau)
    columns = [positive, negative]
    if extra_negatives is not None:
        q = F.normalize(queries, dim=-1)
        own = F.normalize(extra_negatives.detach().to(q.dtype), dim=-1)
        columns.append(torch.einsum("nd,nsd->ns", q, own) / tau)
    return torch.cat(columns, dim=1)


def queue_info_nce(
    queries: torch.Tensor,
    keys: torch.Tensor,
    queue: torch.Tensor,
    *,
    tau: float,
    extra_negatives: torch.Tensor | None = None,
) -> torch.Tensor:
    """MoCo loss: cross-entropy of picking the positive key (index 0) among 1 + K candidates.

    ``loss = -mean_i log( e^{s(q_i,k_i)/tau} / (e^{s(q_i,k_i)/tau} + sum_j e^{s(q_i,queue_j)/tau}) )``

    Args:
        queries: (N, D) query embeddings.
        keys: (N, D) positive keys.
        queue: (K, D) negative keys (normalised or not; cosine similarity is used).
        tau: temperature (MoCo/CERT: 0.07).
        extra_negatives: optional (N, S, D) per-query negatives (MoCHi), added to the denominator.

    Returns:
        Scalar float32 loss.
    """
    logits = queue_logits(queries, keys, queue, tau, extra_negatives)
    labels = torch.zeros(queries.shape[0], dtype=torch.long, device=queries.device)
    return F.cross_entropy(logits, labels)
