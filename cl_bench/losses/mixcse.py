"""MixCSE (Zhang et al., AAAI 2022): InfoNCE with hard negatives mixed from a positive and a neighbour's view.

As the official code computes it (BDBC-KG-NLP/MixCSE_AAAI2022, mixcse/models_mix.py ``cl_forward``
l. 198-275, commit 884145e), with ``s(u, v) = cos(u, v) / τ`` and indices modulo N:

* the SimCSE block ``S[i, j] = s(a_i, p_j)``;
* mixed positives ``m_j = sg(λ·p_j + (1−λ)·p_{j+1})`` (stop-gradient: no gradient flows through a mixed
  column) and the block ``M[i, j] = s(a_i, m_j)``: for anchor i, ``m_i`` is its own positive mixed with a
  neighbour — the hard negative;
* the other way, mixed anchors ``n_i = sg(λ·a_i + (1−λ)·a_{i+1})`` and the block ``R[i, j] = s(n_i, p_j)``
  in row i (its gradient reaches the positives only);
* ``loss = mean_i −log softmax([S | H | M | R])[i, i]`` (H: optional given hard negatives, ``s(a_i, h_k)``).

Column ``m_{i−1} = λ·p_{i−1} + (1−λ)·p_i`` of row i and ``s(n_i, p_{i+1})`` (``n_i`` holds ``a_{i+1}``,
whose positive is ``p_{i+1}``) mostly contain the row's positive pair; the official code multiplies
these two logits by 0 (they stay in the softmax as e⁰). ``mask_positive_mix`` chooses: ``zero``
(the official code), ``drop`` (left out of the denominator), ``none`` (kept as computed).

The mix is of the raw embeddings (the code); the paper's text normalises before mixing. Cosine is
scale-invariant per vector but the mix is not, so the two differ when norms differ.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from cl_bench.losses.similarity import check_inputs, cosine_logits, working_precision


def mix_with_next(x: torch.Tensor, lambd: float) -> torch.Tensor:
    """``λ·x_i + (1−λ)·x_{i+1}`` (indices modulo N), detached: MixCSE's mixed embeddings (no gradient)."""
    return (lambd * x + (1.0 - lambd) * torch.roll(x, shifts=-1, dims=0)).detach()


def mixcse(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    hard_negatives: torch.Tensor | None = None,
    *,
    labels: torch.Tensor | Sequence[int] | None = None,
    tau: float,
    lambd: float,
    mask_positive_mix: str,
) -> torch.Tensor:
    """MixCSE's InfoNCE: in-batch negatives plus 2N detached mixed hard negatives per anchor.

    Args:
        anchors: (N, D) first views.
        positives: (N, D) second views; row i is the positive of anchor i.
        hard_negatives: optional (K, D) extra negatives of every anchor (columns after the in-batch ones).
        labels: not supported (MixCSE mixes a positive with its neighbour's view: the pair structure is fixed).
        tau: temperature (> 0; the official script's ``--temp 0.05``).
        lambd: λ, the weight of the row's own view in a mix (the official script's ``--lambdas 0.2``).
        mask_positive_mix: ``zero`` | ``drop`` | ``none``: what happens to the two mixed logits that
            contain the row's positive pair (see the module docstring; ``zero`` is the official code).

    Returns:
        Scalar loss (at least float32).
    """
    if labels is not None:
        raise ValueError("loss=mixcse: labels are not supported (the mixed negatives follow the batch's pair order)")
    check_inputs(anchors, positives, hard_negatives)
    a, p = working_precision(anchors), working_precision(positives)
    n = a.shape[0]
    blocks = [cosine_logits(a, p, tau)]
    if hard_negatives is not None and hard_negatives.shape[0] > 0:
        blocks.append(cosine_logits(a, hard_negatives, tau))
    mixed_positives = cosine_logits(a, mix_with_next(p, lambd), tau)  # M[i, j] = s(a_i, m_j)
    mixed_anchors = cosine_logits(mix_with_next(a, lambd), p, tau)  # R[i, j] = s(n_i, p_j)
    eye = torch.eye(n, dtype=torch.bool, device=a.device)
    holds_positive = (torch.roll(eye, shifts=-1, dims=1), torch.roll(eye, shifts=1, dims=1))  # (i, i−1), (i, i+1)
    if mask_positive_mix == "zero":  # the official `mask * z1_z3_cos`: the logit becomes 0, e^0 stays
        mixed_positives = mixed_positives.masked_fill(holds_positive[0], 0.0)
        mixed_anchors = mixed_anchors.masked_fill(holds_positive[1], 0.0)
    elif mask_positive_mix == "drop":  # out of the denominator
        mixed_positives = mixed_positives.masked_fill(holds_positive[0], float("-inf"))
        mixed_anchors = mixed_anchors.masked_fill(holds_positive[1], float("-inf"))
    elif mask_positive_mix != "none":  # a value MaskPositiveMix does not hold (composition rejects it)
        raise ValueError(f"loss.mask_positive_mix: unknown '{mask_positive_mix}'; valid: zero, drop, none")
    logits = torch.cat([*blocks, mixed_positives, mixed_anchors], dim=1)
    return F.cross_entropy(logits, torch.arange(n, device=a.device))


