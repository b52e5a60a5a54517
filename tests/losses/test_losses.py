"""Every loss against a naive reference: explicit Python loops over the formula in the documents.

Values and gradients (anchors, positives, hard negatives) are compared in float64 on random
embeddings, for several batch sizes, with and without labels and hard negatives.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from conftest import as_built, cos, lse, naive_info_nce

from cl_bench.losses.contrastive import contrastive
from cl_bench.losses.debiased import debiased
from cl_bench.losses.hard_negative import hard_negative
from cl_bench.losses.infonce import info_nce
from cl_bench.losses.lifted import lifted
from cl_bench.losses.nce import nce
from cl_bench.losses.npair import npair
from cl_bench.losses.ntxent import ntxent
from cl_bench.losses.snn import snn
from cl_bench.losses.supcon import supcon
from cl_bench.losses.triplet import triplet

DIM = 5


def unit(u: torch.Tensor) -> torch.Tensor:
    return u / u.norm()


def dist(u: torch.Tensor, v: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    if normalize:
        u, v = unit(u), unit(v)
    return torch.sqrt(sum((u[k] - v[k]) ** 2 for k in range(u.shape[0])))


def sq_dist(u: torch.Tensor, v: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    if normalize:
        u, v = unit(u), unit(v)
    return sum((u[k] - v[k]) ** 2 for k in range(u.shape[0]))


def log_sigmoid(x: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x, max=0.0) - torch.log(1 + torch.exp(-torch.abs(x)))


def views(a, p, y):
    """(embeddings, labels) of all 2N views."""
    return [*a, *p], [*y, *y]


def naive_ntxent(a, p, h, y, tau=0.05):
    z, lab = views(a, p, y)
    terms = []
    for k in range(len(z)):
        for m in range(len(z)):
            if m == k or lab[m] != lab[k]:
                continue
            positive = cos(z[k], z[m]) / tau
            negatives = [cos(z[k], z[q]) / tau for q in range(len(z)) if q != k and lab[q] != lab[k]]
            negatives += [cos(z[k], hk) / tau for hk in h]
            terms.append(-(positive - lse([positive, *negatives])))
    return sum(terms) / len(terms)


def naive_nce(a, p, h, y, tau=0.05, noise_prob=None):
    candidates = [*p, *h]
    candidate_labels = [*y, *[None] * len(h)]
    q = noise_prob if noise_prob is not None else 1.0 / len(candidates)
    terms = []
    for i in range(len(a)):
        noise = [c for c, lab in zip(candidates, candidate_labels, strict=True) if lab != y[i]]
        k = len(noise)
        for j in range(len(p)):
            if y[j] != y[i]:
                continue
            if k == 0:
                terms.append(a.sum() * 0.0)
                continue
            data_logit = cos(a[i], p[j]) / tau - math.log(k * q)
            term = log_sigmoid(data_logit)
            for c in noise:
                term = term + log_sigmoid(-(cos(a[i], c) / tau - math.log(k * q)))
            terms.append(-term)
    return sum(terms) / len(terms)


def naive_contrastive(a, p, h, y, margin=1.0, normalize=True):
    terms = []
    for i in range(len(a)):
        for j, c in enumerate([*p, *h]):
            if j < len(p) and y[j] == y[i]:
                terms.append(sq_dist(a[i], c, normalize))
            else:
                terms.append(torch.clamp(margin - dist(a[i], c, normalize), min=0.0) ** 2)
    return sum(terms) / len(terms)


def naive_triplet_hardest(a, p, h, y, margin=0.2, normalize=True):
    terms = []
    for i in range(len(a)):
        negatives = [sq_dist(a[i], p[m], normalize) for m in range(len(p)) if y[m] != y[i]]
        negatives += [sq_dist(a[i], hk, normalize) for hk in h]
        if not negatives:
            continue
        hardest = min(negatives, key=lambda t: t.item())
        for j in range(len(p)):
            if y[j] == y[i]:
                terms.append(torch.clamp(sq_dist(a[i], p[j], normalize) - hardest + margin, min=0.0))
    return sum(terms) / len(terms) if terms else a.sum() * 0.0


def naive_lifted(a, p, h, y, margin=1.0, normalize=True):
    candidates = [*p, *h]
    is_negative = [[j >= len(p) or y[j] != y[i] for j in range(len(candidates))] for i in range(len(a))]
    total, count = 0.0, 0
    for i in range(len(a)):
        for j in range(len(p)):
            if is_negative[i][j]:
                continue
            count += 1
            slack = [
                margin - dist(a[i], candidates[k], normalize)
                for k in range(len(candidates))
                if is_negative[i][k]
            ]
            slack += [
                margin - dist(a[m], candidates[j], normalize) for m in range(len(a)) if is_negative[m][j]
            ]
            if not slack:
                total = total + a.sum() * 0.0
                continue
            j_ij = dist(a[i], p[j], normalize) + lse(slack)
            total = total + torch.clamp(j_ij, min=0.0) ** 2
    return total / (2 * count)


def naive_npair(a, p, h, y, tau=1.0, l2_reg=0.002):
    terms = []
    for i in range(len(a)):
        negatives = [torch.dot(a[i], p[m]) / tau for m in range(len(p)) if y[m] != y[i]]
        negatives += [torch.dot(a[i], hk) / tau for hk in h]
        for j in range(len(p)):
            if y[j] == y[i]:
                positive = torch.dot(a[i], p[j]) / tau
                terms.append(lse([torch.zeros((), dtype=a.dtype), *[n - positive for n in negatives]]))
    penalty = sum(torch.dot(a[i], a[i]) + torch.dot(p[i], p[i]) for i in range(len(a))) / len(a)
    return sum(terms) / len(terms) + l2_reg * penalty


def naive_snn(a, p, h, y, tau=0.1, normalize=True):
    z, lab = views(a, p, y)
    z, lab = [*z, *h], [*lab, *[("hard", k) for k in range(len(h))]]
    terms = []
    for i in range(len(z)):
        same = [-sq_dist(z[i], z[j], normalize) / tau for j in range(len(z)) if j != i and lab[j] == lab[i]]
        if not same:
            continue
        others = [-sq_dist(z[i], z[k], normalize) / tau for k in range(len(z)) if k != i]
        terms.append(-(lse(same) - lse(others)))
    return sum(terms) / len(terms)


def naive_debiased(a, p, h, y, tau=0.05, tau_plus=0.1, beta=0.0, symmetric=False):
    """Chuang et al. (beta = 0) / Robinson et al. code, written per anchor and per positive."""
    if symmetric:
        rows, row_labels = views(a, p, y)
        row_ids = list(range(2 * len(a)))
        columns, column_labels, column_ids = (
            [*rows, *h],
            [*row_labels, *[None] * len(h)],
            [*row_ids, *[-1] * len(h)],
        )
    else:
        rows, row_labels, row_ids = list(a), list(y), list(range(len(a)))
        columns = [*p, *h]
        column_labels = [*y, *[None] * len(h)]
        column_ids = [len(a) + j for j in range(len(p))] + [-1] * len(h)
    terms = []
    for r in range(len(rows)):
        sims = [
            (cos(rows[r], columns[c]) / tau, column_labels[c] == row_labels[r])
            for c in range(len(columns))
            if column_ids[c] != row_ids[r]
        ]
        pos = [torch.exp(s) for s, same in sims if same]
        neg = [torch.exp(s) for s, same in sims if not same]
        n = len(neg)
        if n == 0:
            terms += [a.sum() * 0.0] * len(pos)
            continue
        importance = [v**beta for v in neg]
        reweighted = sum(w * v for w, v in zip(importance, neg, strict=True)) / (sum(importance) / n)
        pos_mean = sum(pos) / len(pos)
        ng = (reweighted - tau_plus * n * pos_mean) / (1 - tau_plus)
        ng = torch.clamp(ng, min=n * math.exp(-1 / tau))
        for v in pos:
            terms.append(-torch.log(v / (v + ng)))
    return sum(terms) / len(terms)


def naive_supcon(a, p, h, y, tau=0.05, contrast_mode="all"):
    z, lab = views(a, p, y)
    anchors = range(len(z)) if contrast_mode == "all" else range(len(a))
    per_anchor = []
    for i in anchors:
        everything = [cos(z[i], z[k]) / tau for k in range(len(z)) if k != i] + [
            cos(z[i], hk) / tau for hk in h
        ]
        log_denominator = lse(everything)
        positives = [cos(z[i], z[k]) / tau for k in range(len(z)) if k != i and lab[k] == lab[i]]
        if positives:
            per_anchor.append(-sum(s - log_denominator for s in positives) / len(positives))
    return sum(per_anchor) / len(per_anchor)


# loss function, naive reference, keyword arguments for both
CASES: list[tuple[str, Callable, Callable, dict]] = [
    ("infonce", info_nce, naive_info_nce, {"tau": 0.05}),
    ("infonce_alpha", info_nce, naive_info_nce, {"tau": 0.1, "hard_negative_alpha": 0.5}),
    ("infonce_alpha0", info_nce, naive_info_nce, {"tau": 0.1, "hard_negative_alpha": 0.0}),
    ("ntxent", ntxent, naive_ntxent, {"tau": 0.07}),
    ("nce", nce, naive_nce, {"tau": 0.2}),
    ("nce_q", nce, naive_nce, {"tau": 0.2, "noise_prob": 0.05}),
    ("contrastive", contrastive, naive_contrastive, {"margin": 1.0}),
    ("contrastive_raw", contrastive, naive_contrastive, {"margin": 3.0, "normalize": False}),
    ("triplet", triplet, naive_triplet_hardest, {"margin": 0.5}),
    ("triplet_raw", triplet, naive_triplet_hardest, {"margin": 2.0, "normalize": False}),
    ("lifted", lifted, naive_lifted, {"margin": 1.0}),
    ("lifted_raw", lifted, naive_lifted, {"margin": 1.5, "normalize": False}),
    ("npair", npair, naive_npair, {"tau": 1.0, "l2_reg": 0.002}),
    ("npair_tau", npair, naive_npair, {"tau": 2.0, "l2_reg": 0.01}),
    ("snn", snn, naive_snn, {"tau": 0.1}),
    ("snn_raw", snn, naive_snn, {"tau": 2.0, "normalize": False}),
    ("debiased", debiased, naive_debiased, {"tau": 0.1, "tau_plus": 0.1}),
    ("debiased_clamped", debiased, naive_debiased, {"tau": 0.5, "tau_plus": 0.4}),
    ("debiased_symmetric", debiased, naive_debiased, {"tau": 0.1, "tau_plus": 0.1, "symmetric": True}),
    ("hard_negative", hard_negative, naive_debiased, {"tau": 0.1, "beta": 1.0, "tau_plus": 0.1}),
    ("hard_negative_b3", hard_negative, naive_debiased, {"tau": 0.2, "beta": 3.0, "tau_plus": 0.0}),
    (
        "hard_negative_sym",
        hard_negative,
        naive_debiased,
        {"tau": 0.1, "beta": 0.5, "tau_plus": 0.2, "symmetric": True},
    ),
    ("supcon", supcon, naive_supcon, {"tau": 0.1}),
    ("supcon_one", supcon, naive_supcon, {"tau": 0.1, "contrast_mode": "one"}),
]


def random_batch(n: int, with_labels: bool, with_hard: bool, seed: int):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(n, DIM, generator=gen, dtype=torch.float64)
    p = a + 0.7 * torch.randn(n, DIM, generator=gen, dtype=torch.float64)  # correlated views
    h = torch.randn(n, DIM, generator=gen, dtype=torch.float64) if with_hard else None
    y = torch.randint(0, max(1, (n + 1) // 2), (n,), generator=gen) if with_labels else None
    return a, p, h, y


@pytest.mark.parametrize("n", [2, 5])
@pytest.mark.parametrize("with_labels", [False, True], ids=["pairs", "labels"])
@pytest.mark.parametrize("with_hard", [False, True], ids=["inbatch", "hardneg"])
@pytest.mark.parametrize(("name", "loss_fn", "reference", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_loss_matches_naive_reference(name, loss_fn, reference, kwargs, n, with_labels, with_hard) -> None:
    if name == "infonce_alpha" or name == "infonce_alpha0":
        with_hard = True  # alpha weighs each anchor's own hard negative
    a, p, h, y = random_batch(n, with_labels, with_hard, seed=n * 10 + with_labels * 3 + with_hard)
    leaves = [t.clone().requires_grad_(True) for t in (a, p) + ((h,) if h is not None else ())]
    ref_leaves = [t.detach().clone().requires_grad_(True) for t in leaves]

    value = as_built(loss_fn)(leaves[0], leaves[1], leaves[2] if h is not None else None, labels=y, **kwargs)
    value.backward()
    ref_h = ref_leaves[2] if h is not None else []
    ref_y = y.tolist() if y is not None else list(range(n))
    expected = reference(ref_leaves[0], ref_leaves[1], ref_h, ref_y, **kwargs)
    expected.backward()

    assert value.dim() == 0
    assert value.item() == pytest.approx(expected.item(), rel=1e-9, abs=1e-10)
    for got, want in zip(leaves, ref_leaves, strict=True):
        # A reference term that is identically 0 leaves no graph: its gradient is zero.
        want_grad = want.grad if want.grad is not None else torch.zeros_like(want)
        torch.testing.assert_close(got.grad, want_grad, rtol=1e-7, atol=1e-9)
