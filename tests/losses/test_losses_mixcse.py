"""MixCSE's loss (cl_bench/losses/mixcse.py) against an explicit-loop float64 reference of the official code's
formula (values and gradients, several batch sizes, batch of 2, identical views), and the mixed columns
are detached: no gradient flows through them."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import as_built

from cl_bench.losses.mixcse import mixcse
from cl_bench.specs import loss_spec_of

DIM = 5
SIZES = (2, 3, 7)


def randn(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(True)


def cos(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    dot = sum(u[k] * v[k] for k in range(u.shape[0]))
    return dot / (torch.sqrt(sum(u[k] ** 2 for k in range(u.shape[0]))) * torch.sqrt(sum(v[k] ** 2 for k in range(v.shape[0]))))


def naive_mixcse(a, p, tau: float, lambd: float, mask: str, hard=None) -> torch.Tensor:
    """Row by row: [s(a_i, p_j)]_j, [s(a_i, h_k)]_k, [s(a_i, m_j)]_j, [s(n_i, p_j)]_j with m, n the detached mixes."""
    n = a.shape[0]
    total = 0.0
    for i in range(n):
        logits = [cos(a[i], p[j]) / tau for j in range(n)]
        if hard is not None:
            logits += [cos(a[i], hard[k]) / tau for k in range(hard.shape[0])]
        for j in range(n):  # m_j = λ p_j + (1-λ) p_{j+1}, no gradient
            m = (lambd * p[j] + (1 - lambd) * p[(j + 1) % n]).detach()
            value = cos(a[i], m) / tau
            if j == (i - 1) % n:  # holds p_i, anchor i's positive
                value = {"zero": value * 0, "drop": None, "none": value}[mask]
            if value is not None:
                logits.append(value)
        mixed_anchor = (lambd * a[i] + (1 - lambd) * a[(i + 1) % n]).detach()
        for j in range(n):
            value = cos(mixed_anchor, p[j]) / tau
            if j == (i + 1) % n:  # n_i holds a_{i+1}, whose positive is p_{i+1}
                value = {"zero": value * 0, "drop": None, "none": value}[mask]
            if value is not None:
                logits.append(value)
        denominator = sum(torch.exp(v) for v in logits)
        total = total - (logits[i] - torch.log(denominator))
    return total / n


def assert_same(loss, reference, inputs) -> None:
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, reference, rtol=1e-9, atol=1e-10)
    got = torch.autograd.grad(loss, inputs, retain_graph=True)
    want = torch.autograd.grad(reference, inputs)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-7, atol=1e-9)


def test_mixcse_is_a_pair_loss() -> None:
    assert loss_spec_of(mixcse).kind == "pair"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("mask", ["zero", "drop", "none"])
@pytest.mark.parametrize("lambd", [0.2, 0.7])
def test_mixcse_matches_the_loop_reference(n: int, mask: str, lambd: float) -> None:
    a, p = randn(n, DIM, seed=n), randn(n, DIM, seed=100 + n)
    loss = mixcse(a, p, tau=0.05, lambd=lambd, mask_positive_mix=mask)
    assert_same(loss, naive_mixcse(a, p, 0.05, lambd, mask), [a, p])


def test_mixcse_with_hard_negatives_and_identical_views() -> None:
    a, p, h = randn(3, DIM, seed=1), randn(3, DIM, seed=2), randn(4, DIM, seed=3)
    assert_same(as_built(mixcse)(a, p, h, tau=0.1), naive_mixcse(a, p, 0.1, 0.2, "zero", hard=h), [a, p, h])
    same = randn(4, DIM, seed=4)
    twin = same.detach().clone().requires_grad_(True)
    loss = as_built(mixcse)(same, twin, tau=0.05)
    assert_same(loss, naive_mixcse(same, twin, 0.05, 0.2, "zero"), [same, twin])
    assert math.isfinite(loss.item())


def test_mixed_columns_are_detached() -> None:
    """The mixed embeddings carry no gradient: the loss's gradient equals the one computed with the mixes
    as constants, and with λ = 1 (mixes = the views themselves, detached) the gradient w.r.t. the positives
    comes only from the S and R blocks."""
    n = 5
    a, p = randn(n, DIM, seed=7), randn(n, DIM, seed=8)
    loss = as_built(mixcse)(a, p, tau=0.05, lambd=0.3)
    ga, gp = torch.autograd.grad(loss, [a, p])
    # the same loss with the mixes built from constant copies of a and p: identical gradients
    a_const, p_const = a.detach().clone(), p.detach().clone()
    from cl_bench.losses.mixcse import mix_with_next

    mixed_p, mixed_a = mix_with_next(p_const, 0.3), mix_with_next(a_const, 0.3)
    an, pn = torch.nn.functional.normalize(a, dim=1), torch.nn.functional.normalize(p, dim=1)
    m_logits = an @ torch.nn.functional.normalize(mixed_p, dim=1).T / 0.05
    r_logits = torch.nn.functional.normalize(mixed_a, dim=1) @ pn.T / 0.05
    eye = torch.eye(n, dtype=torch.bool)
    m_logits = m_logits.masked_fill(torch.roll(eye, -1, 1), 0.0)
    r_logits = r_logits.masked_fill(torch.roll(eye, 1, 1), 0.0)
    logits = torch.cat([an @ pn.T / 0.05, m_logits, r_logits], 1)
    manual = torch.nn.functional.cross_entropy(logits, torch.arange(n))
    wa, wp = torch.autograd.grad(manual, [a, p], retain_graph=True)
    torch.testing.assert_close(ga, wa)
    torch.testing.assert_close(gp, wp)
    # and the mixed columns are graph leaves: their gradient would differ if they were not detached
    undetached_m = an @ torch.nn.functional.normalize(0.3 * p + 0.7 * torch.roll(p, -1, 0), dim=1).T / 0.05
    undetached = torch.nn.functional.cross_entropy(
        torch.cat([an @ pn.T / 0.05, undetached_m.masked_fill(torch.roll(eye, -1, 1), 0.0), r_logits], 1), torch.arange(n))
    assert not torch.allclose(torch.autograd.grad(undetached, [p])[0], gp)


def test_mixcse_rejects_labels_and_an_unknown_mask() -> None:
    a, p = randn(3, DIM, seed=1), randn(3, DIM, seed=2)
    with pytest.raises(ValueError, match="loss=mixcse: labels"):
        as_built(mixcse)(a, p, labels=[0, 1, 0])
    with pytest.raises(ValueError, match="loss.mask_positive_mix: unknown 'half'"):
        as_built(mixcse)(a, p, mask_positive_mix="half")
