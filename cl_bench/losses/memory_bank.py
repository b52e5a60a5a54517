"""Instance discrimination with a memory bank (Wu, Xiong, Yu & Lin, CVPR 2018).

Every training item i is its own class. The non-parametric softmax
``P(i|f) = exp(v_iᵀ f / τ) / Z`` over the n bank entries ``v`` is approximated by NCE (Eq. 5–7):
the item's own bank entry is the data sample and M bank entries drawn uniformly
(``P_n = 1/n``) are noise samples, with

``h(i, f) = P(i|f) / (P(i|f) + M·P_n(i))``,
``J_NCE = −mean_batch [ log h(i, f) + Σ_{j ∈ noise} log(1 − h(j, f)) ]``,

and Z a constant estimated once by Monte Carlo (``Z ≈ n · mean_j exp(v_jᵀ f / τ)``, Eq. 8, the
official code's first-batch estimate: :func:`estimate_partition`). The proximal term (Eq. 10)
``λ ‖f_i − v_i‖²`` keeps each feature near its previous bank entry. The bank and its momentum
update live in the method (:mod:`cl_bench.methods.memory_bank`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import working_precision


def bank_logits(features: torch.Tensor, positives: torch.Tensor, noise: torch.Tensor, tau: float) -> torch.Tensor:
    """(N, 1 + M) scores ``v·f / τ``: column 0 the item's own entry, then its M noise entries.

    Args:
        features: (N, D) L2-normalised features of the batch.
        positives: (N, D) each item's bank entry.
        noise: (N, M, D) the noise entries drawn for each item.
        tau: temperature.
    """
    f = working_precision(features)
    positive = (f * working_precision(positives)).sum(-1, keepdim=True)
    negative = torch.einsum("nd,nmd->nm", f, working_precision(noise))
    return torch.cat([positive, negative], dim=1) / tau


@torch.no_grad()
def estimate_partition(logits: torch.Tensor, num_data: int) -> float:
    """Monte-Carlo estimate of Z = ``n · mean(exp(logits))`` (the official code's first-batch estimate)."""
    return float(num_data * torch.exp(logits.double()).mean())


def memory_bank_nce(
    features: torch.Tensor,
    positives: torch.Tensor,
    noise: torch.Tensor,
    *,
    num_data: int,
    partition: float,
    tau: float,
    proximal_lambda: float,
) -> torch.Tensor:
    """NCE approximation of the non-parametric softmax, plus the proximal term.

    Args:
        features: (N, D) L2-normalised features of the batch (gradients flow through them).
        positives: (N, D) each item's bank entry (from earlier steps; no gradient).
        noise: (N, M, D) M uniformly drawn bank entries per item (no gradient).
        num_data: n, the number of items (bank rows): the noise distribution is ``1/n``.
        partition: Z, the normalising constant of ``P(i|f)`` (:func:`estimate_partition`).
        tau: temperature (paper: 0.07).
        proximal_lambda: λ of ``λ ‖f_i − v_i‖²`` (paper: 30 for its proximal runs, 0 = off).

    Returns:
        Scalar loss: the NCE loss averaged over the batch, plus λ times the mean proximal distance.
    """
    if num_data < 1:
        raise ValueError(f"num_data must be >= 1, got {num_data}")
    if not partition > 0:
        raise ValueError(f"partition must be > 0, got {partition}")
    logits = bank_logits(features, positives.detach(), noise.detach(), tau)
    num_noise = noise.shape[1]
    # log P(i|f) − log(M·P_n): log h = −softplus(−that), log(1 − h) = −softplus(that)
    log_ratio = logits - math.log(partition) - math.log(num_noise / num_data)
    nce = F.softplus(-log_ratio[:, 0]).sum() + F.softplus(log_ratio[:, 1:]).sum()
    loss = nce / features.shape[0]
    if proximal_lambda > 0:
        f = working_precision(features)
        loss = loss + proximal_lambda * (f - working_precision(positives).detach()).pow(2).sum(-1).mean()
    return loss
