"""Jensen–Shannon mutual-information estimator between local and global features (IS-BERT Eq. 2).

IS-BERT (Zhang et al., EMNLP 2020) maximises, as Deep InfoMax does, a JSD lower bound on the MI
between every token's local n-gram feature and its sentence's global feature:

    Î_JSD = E_pos[−sp(−T(l, g))] − E_neg[sp(T(l', g))],     sp(z) = log(1 + e^z)

where positives pair a token with its own sentence and negatives with every other sentence of
the batch. The official code (``MutualInformationLoss``, ``measure='JSD'``) adds the constants
``log 2`` to both expectations (``E_pos = log2 − sp(−s)``, ``E_neg = sp(s) − log2``), which
shifts the value without changing the gradient; :func:`jsd_mi_loss` keeps them so its value is
comparable to the reference implementation. Padding tokens take no part.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

LOG_2 = math.log(2.0)


def jsd_mi_loss(scores: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Negative JSD MI estimate (the quantity to minimise).

    Args:
        scores: (b, T, b) discriminator scores; ``scores[i, t, j] = T(local_{i,t}, global_j)``.
        token_mask: (b, T), nonzero for real tokens of sentence i (padding is ignored).

    Returns:
        Scalar float32 ``E_neg − E_pos`` with ``E_pos`` the mean over real tokens of
        ``log2 − softplus(−s_{i,t,i})`` and ``E_neg`` the mean over (real token, other
        sentence) pairs of ``softplus(s_{i,t,j}) − log2``.
    """
    batch, length, columns = scores.shape
    if columns != batch or token_mask.shape != (batch, length):
        raise ValueError(
            f"scores must be (b, T, b) with token_mask (b, T); got {tuple(scores.shape)}, {tuple(token_mask.shape)}"
        )
    if batch < 2:
        raise ValueError("jsd_mi_loss: needs at least 2 sentences (negatives come from the other sentences)")
    scores = scores.float()
    real = token_mask.bool()
    own = torch.eye(batch, dtype=torch.bool, device=scores.device).unsqueeze(1)  # (b, 1, b)
    positive_pairs = real.unsqueeze(-1) & own
    negative_pairs = real.unsqueeze(-1) & ~own
    positive_expectation = (LOG_2 - F.softplus(-scores[positive_pairs])).mean()
    negative_expectation = (F.softplus(scores[negative_pairs]) - LOG_2).mean()
    return negative_expectation - positive_expectation
