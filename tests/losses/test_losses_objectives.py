"""The non-contrastive, clustering, memory-bank, hard-negative-mixing and SBERT objectives against
naive references written as explicit loops over the documents' formulas (float64, values and
gradients, several batch sizes), plus their edge cases (batch of 2, identical and collapsed views).
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import as_built

from cl_bench.losses.barlow_twins import barlow_twins
from cl_bench.losses.byol import byol
from cl_bench.losses.memory_bank import bank_logits, estimate_partition, memory_bank_nce
from cl_bench.losses.mochi import mix_hard_negatives
from cl_bench.losses.sbert import pair_features, sbert_regression, sbert_softmax, sbert_triplet
from cl_bench.losses.swav import sinkhorn_knopp, swav
from cl_bench.specs import loss_spec_of

DIM = 4
SIZES = (2, 3, 7)


def randn(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(True)


def grads(value: torch.Tensor, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(torch.autograd.grad(value, inputs, allow_unused=True))


def assert_same(loss, reference, inputs) -> None:
    """Values and gradients of the loss and of its naive reference agree (float64)."""
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, reference, rtol=1e-9, atol=1e-10)
    for got, want in zip(grads(loss, inputs), grads(reference, inputs), strict=True):
        if want is None:
            assert got is None or torch.all(got == 0)
        else:
            torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-9)


def norm(u: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(sum(u[k] ** 2 for k in range(u.shape[0])))


def cos(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return sum(u[k] * v[k] for k in range(u.shape[0])) / (norm(u) * norm(v))


# ------------------------------------------------------------------------------------------------
# Barlow Twins
# ------------------------------------------------------------------------------------------------
def naive_barlow_twins(z1: torch.Tensor, z2: torch.Tensor, lambd: float) -> torch.Tensor:
    n, d = z1.shape

    def standardized(z: torch.Tensor) -> list[list[torch.Tensor]]:
        columns = []
        for k in range(d):
            mean = sum(z[i, k] for i in range(n)) / n
            var = sum((z[i, k] - mean) ** 2 for i in range(n)) / n
            columns.append([(z[i, k] - mean) / torch.sqrt(var + 1e-5) for i in range(n)])
        return columns

    a, b = standardized(z1), standardized(z2)
    loss = torch.zeros((), dtype=z1.dtype)
    for i in range(d):
        for j in range(d):
            c = sum(a[i][m] * b[j][m] for m in range(n)) / n
            loss = loss + ((1 - c) ** 2 if i == j else lambd * c**2)
    return loss


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("lambd", [0.0051, 0.5])
def test_barlow_twins_matches_naive(n: int, lambd: float) -> None:
    z1, z2 = randn(n, DIM, seed=n), randn(n, DIM, seed=100 + n)
    assert_same(barlow_twins(z1, z2, lambd=lambd), naive_barlow_twins(z1, z2, lambd), [z1, z2])


def test_barlow_twins_edge_cases() -> None:
    z = randn(5, DIM, seed=1)
    identical = barlow_twins(z, z, lambd=0.0051)
    assert torch.isfinite(identical)
    # identical views: the diagonal of C is var/(var+eps) ≈ 1, only the off-diagonal terms remain
    torch.testing.assert_close(identical, naive_barlow_twins(z, z, 0.0051))
    # collapsed views (every row equal): standardisation gives 0, C = 0, the loss is exactly D
    collapsed = torch.ones(6, DIM, dtype=torch.float64, requires_grad=True)
    loss = as_built(barlow_twins)(collapsed, collapsed.detach() * 3)
    assert loss.item() == pytest.approx(DIM)
    (grad,) = torch.autograd.grad(loss, collapsed)
    assert torch.isfinite(grad).all()
    with pytest.raises(ValueError, match="at least 2"):
        as_built(barlow_twins)(z[:1], z[:1])
    assert loss_spec_of(barlow_twins).kind == "two_view"


# ------------------------------------------------------------------------------------------------
# BYOL
# ------------------------------------------------------------------------------------------------
def naive_byol(p1, p2, t1, t2) -> torch.Tensor:
    def ell(p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        total = torch.zeros((), dtype=p.dtype)
        for i in range(p.shape[0]):
            pn, tn = norm(p[i]), norm(t[i])
            total = total + sum((p[i, k] / pn - t[i, k] / tn) ** 2 for k in range(p.shape[1]))
        return total / p.shape[0]

    return ell(p1, t2) + ell(p2, t1)


@pytest.mark.parametrize("n", SIZES)
def test_byol_matches_naive(n: int) -> None:
    p1, p2, t1, t2 = (randn(n, DIM, seed=10 * n + k) for k in range(4))
    assert_same(byol(p1, p2, t1, t2), naive_byol(p1, p2, t1, t2), [p1, p2, t1, t2])


def test_byol_edge_cases() -> None:
    # collapsed: every prediction and target the same vector -> zero loss, finite (zero) gradient
    c = torch.ones(4, DIM, dtype=torch.float64, requires_grad=True)
    loss = byol(c, c, c.detach(), c.detach())
    assert loss.item() == pytest.approx(0.0, abs=1e-12)
    (grad,) = torch.autograd.grad(loss, c)
    assert torch.isfinite(grad).all()
    # opposite directions: the maximum, 4 per direction
    p = randn(2, DIM, seed=3)
    assert byol(p, p, -p.detach(), -p.detach()).item() == pytest.approx(8.0)
    with pytest.raises(ValueError, match="one shape"):
        byol(p, p, p, p[:1])
    assert loss_spec_of(byol).kind == "predict_target"


# ------------------------------------------------------------------------------------------------
# SwAV
# ------------------------------------------------------------------------------------------------
def naive_sinkhorn(scores: torch.Tensor, epsilon: float, iterations: int) -> list[list[float]]:
    n, k = scores.shape
    q = [[math.exp(scores[i, j].item() / epsilon) for j in range(k)] for i in range(n)]
    total = sum(sum(row) for row in q)
    q = [[x / total for x in row] for row in q]
    for _ in range(iterations):
        for j in range(k):
            column = sum(q[i][j] for i in range(n))
            for i in range(n):
                q[i][j] = q[i][j] / column / k
        for i in range(n):
            row = sum(q[i])
            q[i] = [x / row / n for x in q[i]]
    return q


def naive_swav(s1, s2, tau, epsilon, iterations) -> torch.Tensor:
    n, k = s1.shape
    q1 = naive_sinkhorn(s1.detach(), epsilon, iterations)
    q2 = naive_sinkhorn(s2.detach(), epsilon, iterations)

    def predict(s: torch.Tensor, codes: list[list[float]]) -> torch.Tensor:
        total = torch.zeros((), dtype=s.dtype)
        for i in range(n):
            log_z = torch.log(sum(torch.exp(s[i, j] / tau) for j in range(k)))
            for j in range(k):
                total = total - codes[i][j] * n * (s[i, j] / tau - log_z)
        return total / n

    return (predict(s1, q2) + predict(s2, q1)) / 2


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("prototypes", [3, 5])
def test_swav_matches_naive(n: int, prototypes: int) -> None:
    s1 = torch.tanh(randn(n, prototypes, seed=n)).detach().requires_grad_(True)  # cosine-like scores
    s2 = torch.tanh(randn(n, prototypes, seed=50 + n)).detach().requires_grad_(True)
    codes = sinkhorn_knopp(s1, 0.05, 3)
    torch.testing.assert_close(codes, torch.tensor(naive_sinkhorn(s1, 0.05, 3), dtype=torch.float64))
    assert_same(as_built(swav)(s1, s2, tau=0.1), naive_swav(s1, s2, 0.1, 0.05, 3), [s1, s2])


def test_sinkhorn_marginals() -> None:
    scores = torch.tanh(randn(16, 6, seed=7)).detach()
    plan = sinkhorn_knopp(scores, epsilon=0.05, iterations=3)
    # after its last step every sample's mass is exactly 1/B
    torch.testing.assert_close(plan.sum(1), torch.full((16,), 1 / 16, dtype=torch.float64), rtol=0, atol=1e-12)
    # iterated to convergence, both marginals hold: prototypes 1/K, samples 1/B
    converged = sinkhorn_knopp(scores, epsilon=0.5, iterations=500)
    torch.testing.assert_close(converged.sum(0), torch.full((6,), 1 / 6, dtype=torch.float64), rtol=0, atol=1e-6)
    torch.testing.assert_close(converged.sum(1), torch.full((16,), 1 / 16, dtype=torch.float64), rtol=0, atol=1e-6)
    # no overflow at the paper's ε with scores near 1
    assert torch.isfinite(sinkhorn_knopp(torch.ones(4, 3) * 0.999, 0.05, 3)).all()


def test_swav_edge_cases() -> None:
    s = torch.tanh(randn(2, 3, seed=2)).detach().requires_grad_(True)
    loss = as_built(swav)(s, s)  # batch of 2, identical views
    (grad,) = torch.autograd.grad(loss, s)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    collapsed = torch.full((4, 3), 0.3, dtype=torch.float64, requires_grad=True)
    # collapsed scores: uniform codes, the loss is log K
    assert as_built(swav)(collapsed, collapsed).item() == pytest.approx(math.log(3))


# ------------------------------------------------------------------------------------------------
# Memory bank (Wu et al. 2018)
# ------------------------------------------------------------------------------------------------
def naive_memory_bank(f, v, noise, num_data, partition, tau, lam) -> torch.Tensor:
    n, m = noise.shape[0], noise.shape[1]
    pn = 1.0 / num_data
    total = torch.zeros((), dtype=f.dtype)
    for i in range(n):
        p = torch.exp(sum(f[i, k] * v[i, k] for k in range(f.shape[1])) / tau) / partition
        total = total - torch.log(p / (p + m * pn))
        for j in range(m):
            p = torch.exp(sum(f[i, k] * noise[i, j, k] for k in range(f.shape[1])) / tau) / partition
            total = total - torch.log(1 - p / (p + m * pn))
    loss = total / n
    proximal = sum(sum((f[i, k] - v[i, k]) ** 2 for k in range(f.shape[1])) for i in range(n)) / n
    return loss + lam * proximal


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("lam", [0.0, 30.0])
def test_memory_bank_matches_naive(n: int, lam: float) -> None:
    f = torch.nn.functional.normalize(randn(n, DIM, seed=n), dim=1).detach().requires_grad_(True)
    v = torch.nn.functional.normalize(randn(n, DIM, seed=20 + n), dim=1).detach()
    noise = torch.nn.functional.normalize(randn(n, 5, DIM, seed=40 + n), dim=-1).detach()
    z = estimate_partition(bank_logits(f, v, noise, 0.07), 1000)
    loss = memory_bank_nce(f, v, noise, num_data=1000, partition=z, tau=0.07, proximal_lambda=lam)
    assert_same(loss, naive_memory_bank(f, v, noise, 1000, z, 0.07, lam), [f])


def test_memory_bank_edge_cases() -> None:
    f = torch.nn.functional.normalize(torch.ones(2, DIM, dtype=torch.float64), dim=1).requires_grad_(True)
    noise = f.detach()[:, None, :].repeat(1, 3, 1)  # every entry identical to the features
    loss = as_built(memory_bank_nce)(f, f.detach(), noise, num_data=10, partition=1.0, tau=0.07)
    (grad,) = torch.autograd.grad(loss, f)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    # Z = n·mean(exp(logits)) on the batch's logits
    logits = torch.tensor([[0.0, math.log(3.0)]], dtype=torch.float64)
    assert estimate_partition(logits, 10) == pytest.approx(10 * 2.0)


# ------------------------------------------------------------------------------------------------
# MoCHi
# ------------------------------------------------------------------------------------------------
def naive_mochi(q, queue, hardest, s, s_prime, seed) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    batch, dim = q.shape
    unit = [[q[b, k] / norm(q[b]) for k in range(dim)] for b in range(batch)]
    negatives = [[queue[j, k] / norm(queue[j]) for k in range(dim)] for j in range(queue.shape[0])]
    ranked = []
    for b in range(batch):
        sims = [sum(unit[b][k] * negatives[j][k] for k in range(dim)).item() for j in range(len(negatives))]
        ranked.append(sorted(range(len(negatives)), key=lambda j: -sims[j])[:hardest])
    # the same draws, in the same order, as the implementation
    alpha = torch.rand(batch, s, 1, generator=g, dtype=torch.float64)
    first = torch.randint(hardest, (batch, s), generator=g)
    second = torch.randint(hardest, (batch, s), generator=g)
    beta = 0.5 * torch.rand(batch, s_prime, 1, generator=g, dtype=torch.float64)
    third = torch.randint(hardest, (batch, s_prime), generator=g)
    out = torch.zeros(batch, s + s_prime, dim, dtype=torch.float64)
    for b in range(batch):
        for t in range(s):
            a = alpha[b, t, 0]
            ni, nj = negatives[ranked[b][first[b, t]]], negatives[ranked[b][second[b, t]]]
            mixed = torch.stack([a * ni[k] + (1 - a) * nj[k] for k in range(dim)])
            out[b, t] = mixed / norm(mixed)
        for t in range(s_prime):
            w = beta[b, t, 0]
            nj = negatives[ranked[b][third[b, t]]]
            mixed = torch.stack([w * unit[b][k] + (1 - w) * nj[k] for k in range(dim)])
            out[b, s + t] = mixed / norm(mixed)
    return out


@pytest.mark.parametrize("batch", SIZES)
def test_mochi_matches_naive(batch: int) -> None:
    q, queue = randn(batch, DIM, seed=batch).detach(), randn(12, DIM, seed=99).detach()
    got = mix_hard_negatives(
        q, queue, num_hardest=4, num_synthetic=3, num_query_mixed=2, generator=torch.Generator().manual_seed(5)
    )
    assert got.shape == (batch, 5, DIM) and not got.requires_grad
    torch.testing.assert_close(got, naive_mochi(q, queue, 4, 3, 2, seed=5))


def test_mochi_edge_cases() -> None:
    q, queue = randn(2, DIM, seed=1), randn(6, DIM, seed=2).detach()
    # N = 1: every synthetic negative is the hardest queue entry itself
    out = mix_hard_negatives(q, queue, num_hardest=1, num_synthetic=2, num_query_mixed=3)
    unit_queue = torch.nn.functional.normalize(queue, dim=1)
    hardest = (torch.nn.functional.normalize(q.detach(), dim=1) @ unit_queue.T).argmax(1)
    torch.testing.assert_close(out[:, :2], unit_queue[hardest][:, None].expand(-1, 2, -1))
    # every synthetic row is a unit vector
    torch.testing.assert_close(out.norm(dim=-1), torch.ones(2, 5, dtype=torch.float64))
    assert mix_hard_negatives(q, queue, num_hardest=3, num_synthetic=0, num_query_mixed=0).shape == (2, 0, DIM)
    with pytest.raises(ValueError, match="mochi_hardest"):
        mix_hard_negatives(q, queue, num_hardest=7, num_synthetic=1, num_query_mixed=1)


# ------------------------------------------------------------------------------------------------
# Sentence-BERT
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", SIZES)
def test_sbert_softmax_matches_naive(n: int) -> None:
    u, v = randn(n, DIM, seed=n), randn(n, DIM, seed=30 + n)
    weight = randn(3, 3 * DIM, seed=7)
    labels = torch.arange(n) % 3
    logits = pair_features(u, v) @ weight.T
    loss = sbert_softmax(logits, labels)
    total = torch.zeros((), dtype=torch.float64)
    for i in range(n):
        features = [u[i, k] for k in range(DIM)] + [v[i, k] for k in range(DIM)]
        features += [torch.abs(u[i, k] - v[i, k]) for k in range(DIM)]
        scores = [sum(weight[c, k] * features[k] for k in range(3 * DIM)) for c in range(3)]
        total = total - (scores[labels[i]] - torch.log(sum(torch.exp(s) for s in scores)))
    assert_same(loss, total / n, [u, v, weight])


@pytest.mark.parametrize("n", SIZES)
def test_sbert_regression_matches_naive(n: int) -> None:
    u, v = randn(n, DIM, seed=n), randn(n, DIM, seed=60 + n)
    scores = torch.linspace(0, 1, n, dtype=torch.float64)
    naive = sum((cos(u[i], v[i]) - scores[i]) ** 2 for i in range(n)) / n
    assert_same(sbert_regression(u, v, scores), naive, [u, v])


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("margin", [1.0, 5.0])
def test_sbert_triplet_matches_naive(n: int, margin: float) -> None:
    a, p, neg = randn(n, DIM, seed=n), randn(n, DIM, seed=70 + n), randn(n, DIM, seed=80 + n)
    naive = sum(
        torch.clamp(norm(a[i] - p[i]) - norm(a[i] - neg[i]) + margin, min=0.0) for i in range(n)
    ) / n
    assert_same(sbert_triplet(a, p, neg, margin=margin), naive, [a, p, neg])


def test_sbert_edge_cases() -> None:
    a = randn(2, DIM, seed=4)
    # identical anchor and positive: distance 0 with a finite (zero) gradient from that term
    loss = as_built(sbert_triplet)(a, a, a.detach() + 10.0)
    (grad,) = torch.autograd.grad(loss, a)
    assert loss.item() == 0.0 and torch.isfinite(grad).all()
    assert as_built(sbert_triplet)(a, a, a).item() == pytest.approx(1.0)  # collapsed: exactly the margin
    assert sbert_regression(a, a, torch.ones(2, dtype=torch.float64)).item() == pytest.approx(0.0)


@pytest.mark.parametrize("n", SIZES)
def test_queue_info_nce_with_mochi_negatives_matches_naive(n: int) -> None:
    from cl_bench.losses.moco import queue_info_nce

    q, k = randn(n, DIM, seed=n), randn(n, DIM, seed=200 + n).detach()
    queue = randn(6, DIM, seed=300).detach()
    mixed = mix_hard_negatives(q, queue, num_hardest=3, num_synthetic=2, num_query_mixed=2,
                               generator=torch.Generator().manual_seed(1))
    tau = 0.07
    total = torch.zeros((), dtype=torch.float64)
    for i in range(n):
        scores = [cos(q[i], k[i]) / tau] + [cos(q[i], queue[j]) / tau for j in range(6)]
        scores += [cos(q[i], mixed[i, s]) / tau for s in range(4)]
        total = total - (scores[0] - torch.log(sum(torch.exp(s) for s in scores)))
    assert_same(queue_info_nce(q, k, queue, tau=tau, extra_negatives=mixed), total / n, [q])
    # the mixed negatives are harder than the queue on average: the loss grows with them
    assert queue_info_nce(q, k, queue, tau=tau, extra_negatives=mixed) > queue_info_nce(q, k, queue, tau=tau)
