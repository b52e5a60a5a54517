"""SwAV (Caron et al., NeurIPS 2020): swapped prediction of online cluster assignments.

The method scores each view's normalised projection against K normalised prototypes
(``scores = z̄ C̄ᵀ``, (N, K)); this module turns scores into *codes* with the Sinkhorn–Knopp
algorithm (equal-partition constraint, Eq. 3 and Algorithm 1 of the paper) and computes the
swapped-prediction loss (Eq. 1): each view predicts the other view's codes,

``L = ½ Σ_views −mean_i Σ_k q_ik(other view) · log softmax(scores_i / τ)_k``.

Codes carry no gradient (the paper's ``torch.no_grad``); the prototypes live in the method.
"""

from __future__ import annotations

import torch

from cl_bench.losses.similarity import working_precision


@torch.no_grad()
def sinkhorn_knopp(scores: torch.Tensor, epsilon: float, iterations: int) -> torch.Tensor:
    """The transport plan P (N, K) between N samples and K prototypes (SwAV Algorithm 1).

    Starts from ``exp(scores / ε)`` normalised to total mass 1, then alternates ``iterations``
    times: rescale every prototype's column to mass ``1/K``, then every sample's row to mass
    ``1/N``. After the last step the rows sum to ``1/N`` exactly; the columns approach ``1/K``
    as ``iterations`` grows (3 in the paper: close enough for training).

    Args:
        scores: (N, K) similarities of samples and prototypes.
        epsilon: ε, the entropic regularisation (paper: 0.05).
        iterations: Sinkhorn iterations (paper: 3).

    Returns:
        (N, K) plan with row sums ``1/N``; multiply by N for per-sample codes that sum to 1.
    """
    logits = working_precision(scores).detach() / epsilon
    # shifting by the maximum leaves the normalised plan unchanged and keeps exp finite at small ε
    plan = torch.exp(logits - logits.max())
    plan = plan / plan.sum()
    n, k = plan.shape
    for _ in range(iterations):
        plan = plan / plan.sum(dim=0, keepdim=True) / k
        plan = plan / plan.sum(dim=1, keepdim=True) / n
    return plan


def swav(
    scores_1: torch.Tensor,
    scores_2: torch.Tensor,
    *,
    tau: float,
    epsilon: float,
    sinkhorn_iterations: int,
) -> torch.Tensor:
    """SwAV's swapped-prediction loss of two views' prototype scores.

    Args:
        scores_1: (N, K) cosine scores of view 1 against the prototypes.
        scores_2: (N, K) the same for view 2.
        tau: temperature of the prediction softmax (paper: 0.1).
        epsilon: Sinkhorn's ε (paper: 0.05).
        sinkhorn_iterations: Sinkhorn iterations (paper: 3).

    Returns:
        Scalar loss (the mean of the two directions, as the official code averages over crops).
    """
    if scores_1.shape != scores_2.shape:
        raise ValueError(f"the two views' scores differ in shape: {tuple(scores_1.shape)}, {tuple(scores_2.shape)}")
    n = scores_1.shape[0]
    codes_1 = sinkhorn_knopp(scores_1, epsilon, sinkhorn_iterations) * n
    codes_2 = sinkhorn_knopp(scores_2, epsilon, sinkhorn_iterations) * n
    log_p1 = torch.log_softmax(working_precision(scores_1) / tau, dim=1)
    log_p2 = torch.log_softmax(working_precision(scores_2) / tau, dim=1)
    loss_1 = -(codes_2 * log_p1).sum(dim=1).mean()  # view 1 predicts view 2's codes
    loss_2 = -(codes_1 * log_p2).sum(dim=1).mean()
    return (loss_1 + loss_2) / 2
