"""CoSENT and AnglE against explicit-loop float64 references of the formulas (values and gradients), CoSENT
also against the pairwise loop over all discordant pairs, AnglE's format-A loss against angle-emb's own outputs
(tests/reference_data/angle_ibn.json, raw 0-5, [0, 1] and NLI labels), plus their kinds and edge cases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import as_built

from cl_bench.losses.angle import angle, angle_nli, in_batch_targets
from cl_bench.losses.cosent import cosent
from cl_bench.losses.specs import AnglENLISpec, AnglESpec
from cl_bench.specs import loss_spec_of

SIZES = (2, 3, 6)
DIM = 6


def randn(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(True)


def assert_same(loss: torch.Tensor, reference: torch.Tensor, inputs: list[torch.Tensor]) -> None:
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, reference, rtol=1e-9, atol=1e-10)
    got = torch.autograd.grad(loss, inputs, allow_unused=True)
    want = torch.autograd.grad(reference, inputs, allow_unused=True)
    for g, w in zip(got, want, strict=True):
        if w is None:
            assert g is None or torch.all(g == 0)
        else:
            torch.testing.assert_close(g, w, rtol=1e-7, atol=1e-9)


def cos(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    dot = sum(x[k] * y[k] for k in range(x.shape[0]))
    return dot / (math.sqrt(1.0) * torch.sqrt(sum(x[k] ** 2 for k in range(x.shape[0])))
                  * torch.sqrt(sum(y[k] ** 2 for k in range(y.shape[0]))))


def naive_rank(values: list[torch.Tensor], scores: list[float]) -> torch.Tensor:
    """log(1 + Σ_{s_i < s_j} exp(v_i − v_j)), one term per discordant pair."""
    total = torch.ones((), dtype=torch.float64)
    for i in range(len(values)):
        for j in range(len(values)):
            if scores[i] < scores[j]:
                total = total + torch.exp(values[i] - values[j])
    return torch.log(total)


def naive_angle_value(x: torch.Tensor, y: torch.Tensor, pooling: str) -> torch.Tensor:
    """|Σ_k Re, Im of (a_k + i b_k)(c_k − i d_k)| / (‖z1‖ ‖z2‖), element by element."""
    half = x.shape[0] // 2
    n1 = torch.sqrt(sum(x[k] ** 2 for k in range(x.shape[0])))
    n2 = torch.sqrt(sum(y[k] ** 2 for k in range(y.shape[0])))
    parts = []
    for k in range(half):
        a, b, c, d = x[k], x[half + k], y[k], y[half + k]
        parts.append((a * c + b * d) / (n1 * n2))
    for k in range(half):
        a, b, c, d = x[k], x[half + k], y[k], y[half + k]
        parts.append((b * c - a * d) / (n1 * n2))
    pooled = sum(parts) if pooling == "sum" else sum(parts) / len(parts)
    return torch.abs(pooled)


def naive_in_batch(u: torch.Tensor, v: torch.Tensor, positive: list[bool], scale: float) -> torch.Tensor:
    xs = []
    for i in range(u.shape[0]):
        xs += [u[i], v[i]]
    total = torch.zeros((), dtype=torch.float64)
    for r, x in enumerate(xs):
        if not positive[r // 2]:
            continue
        partner = r + 1 if r % 2 == 0 else r - 1
        denominator = sum(torch.exp(scale * cos(x, xs[j])) for j in range(len(xs)) if j != r)
        total = total - torch.log(torch.exp(scale * cos(x, xs[partner])) / denominator)
    return total / len(xs)


def naive_ce(queries: torch.Tensor, targets: torch.Tensor, scale: float) -> torch.Tensor:
    total = torch.zeros((), dtype=torch.float64)
    for i in range(queries.shape[0]):
        denominator = sum(torch.exp(scale * cos(queries[i], targets[j])) for j in range(targets.shape[0]))
        total = total - torch.log(torch.exp(scale * cos(queries[i], targets[i])) / denominator)
    return total / queries.shape[0]


def scores_for(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    s = torch.randint(0, 6, (n,), generator=g).double() / 5  # ties included, as STS-B's 0.2 steps
    return s


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("scale", [20.0, 1.0])
def test_cosent_matches_the_pairwise_loop(n: int, scale: float) -> None:
    u, v = randn(n, DIM, seed=n), randn(n, DIM, seed=n + 10)
    s = scores_for(n, n)
    reference = naive_rank([scale * cos(u[i], v[i]) for i in range(n)], s.tolist())
    assert_same(cosent(u, v, s, scale=scale), reference, [u, v])


def test_cosent_matches_the_reference_code_form() -> None:
    """bojone's form: logsumexp([0, (λ(cos_i − cos_j) − (1 − [s_i < s_j])·1e12) for all i, j])."""
    u, v = randn(5, DIM, seed=1), randn(5, DIM, seed=2)
    s = torch.tensor([0.2, 0.8, 0.2, 1.0, 0.0], dtype=torch.float64)
    c = torch.nn.functional.cosine_similarity(u, v) * 20
    ordered = (s[:, None] < s[None, :]).double()
    flat = ((c[:, None] - c[None, :]) - (1 - ordered) * 1e12).reshape(-1)
    reference = torch.logsumexp(torch.cat([torch.zeros(1, dtype=torch.float64), flat]), dim=0)
    assert_same(as_built(cosent)(u, v, s), reference, [u, v])


def test_cosent_kind_and_edges() -> None:
    assert loss_spec_of(cosent).kind == "scored_pair"
    u = randn(3, DIM, seed=0)
    assert as_built(cosent)(u, u, torch.ones(3, dtype=torch.float64)).item() == 0.0  # no discordant pair: log 1
    # the order is all that matters: a monotone rescale of the scores gives the same loss
    s = scores_for(3, 3)
    torch.testing.assert_close(as_built(cosent)(u, u.flip(0), s), as_built(cosent)(u, u.flip(0), s * 5 + 1))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("pooling", ["sum", "mean"])
def test_angle_matches_naive(n: int, pooling: str) -> None:
    u, v = randn(n, DIM, seed=n), randn(n, DIM, seed=n + 20)
    s = scores_for(n, n + 1)
    s[0] = 1.0  # at least one positive pair for the in-batch term
    w = {"cosine_w": 0.7, "ibn_w": 1.3, "angle_w": 0.5}
    t = {"cosine_tau": 20.0, "ibn_tau": 5.0, "angle_tau": 3.0}
    reference = (
        w["cosine_w"] * naive_rank([t["cosine_tau"] * cos(u[i], v[i]) for i in range(n)], s.tolist())
        + w["ibn_w"] * naive_in_batch(u, v, [bool(int(x)) for x in s.tolist()], t["ibn_tau"])
        + w["angle_w"] * naive_rank([t["angle_tau"] * naive_angle_value(u[i], v[i], pooling) for i in range(n)],
                                    s.tolist())
    )
    assert_same(angle(u, v, s, **w, **t, angle_pooling=pooling), reference, [u, v])


@pytest.mark.parametrize("n", SIZES)
def test_angle_nli_matches_naive(n: int) -> None:
    q, p, m = randn(n, DIM, seed=n), randn(n, DIM, seed=n + 1), randn(n, DIM, seed=n + 2)
    w = {"cosine_w": 0.4, "ibn_w": 30.0, "cln_w": 1.0, "angle_w": 1.0}
    t = {"cosine_tau": 20.0, "ibn_tau": 20.0, "angle_tau": 20.0}
    us, vs = [*q, *q], [*p, *m]
    labels = [1.0] * n + [0.0] * n
    reference = (
        (w["ibn_w"] * naive_ce(q, p, 20.0) + w["cln_w"] * naive_ce(q, torch.cat([p, m]), 20.0)) / 2
        + w["angle_w"] * naive_rank([20.0 * naive_angle_value(a, b, "sum") for a, b in zip(us, vs, strict=False)], labels)
        + w["cosine_w"] * naive_rank([20.0 * cos(a, b) for a, b in zip(us, vs, strict=False)], labels)
    )
    assert_same(angle_nli(q, p, m, **w, **t, angle_pooling="sum"), reference, [q, p, m])


def test_angle_defaults_are_the_official_trainer_defaults() -> None:
    defaults = AnglENLISpec(name="angle_nli").values()
    assert defaults == {"name": "angle_nli", "cosine_w": 0.0, "ibn_w": 1.0, "cln_w": 1.0, "angle_w": 0.02,
                        "cosine_tau": 20.0, "ibn_tau": 20.0, "angle_tau": 20.0, "angle_pooling": "sum"}
    assert AnglESpec(name="angle").values() == {k: v for k, v in defaults.items() if k != "cln_w"} | {"name": "angle"}
    assert loss_spec_of(angle).kind == "scored_pair" and loss_spec_of(angle_nli).kind == "triplet"


def test_angle_edges() -> None:
    u = randn(3, 5, seed=0)
    with pytest.raises(ValueError, match="odd"):
        as_built(angle)(u, u, torch.ones(3))
    u = randn(3, DIM, seed=0)
    with pytest.raises(ValueError, match="loss.angle_pooling"):
        as_built(angle)(u, u, torch.ones(3), angle_pooling="max")
    # all weights zero: exactly 0; no positive pair: the in-batch term adds 0
    assert as_built(angle)(u, u, torch.ones(3), ibn_w=0, angle_w=0).item() == 0.0
    assert as_built(angle)(u, u.flip(0), torch.zeros(3), angle_w=0).item() == 0.0


ANGLE_REFERENCE = Path(__file__).resolve().parents[1] / "reference_data" / "angle_ibn.json"


def angle_reference_cases() -> list[dict]:
    return json.loads(ANGLE_REFERENCE.read_text())["cases"]


@pytest.mark.parametrize("case", angle_reference_cases(), ids=lambda c: f"{c['label_set']}-{c['weights_name']}")
def test_angle_equals_angle_emb_on_any_label_scale(case: dict) -> None:
    """angle-emb 0.6.1's AngleLoss (format A) and its in_batch_negative_loss, run in their own environment (the
    file's metadata: command, script, package hash), on raw STS-B labels, the same divided by 5, and NLI 0/1 labels:
    loss and gradients within 1e-10."""
    record = json.loads(ANGLE_REFERENCE.read_text())
    u = torch.tensor(record["u"], dtype=torch.float64, requires_grad=True)
    v = torch.tensor(record["v"], dtype=torch.float64, requires_grad=True)
    labels = torch.tensor(case["labels"], dtype=torch.float64)
    weights = case["weights"] if isinstance(case["weights"], dict) else {"cosine_w": 0.0, "ibn_w": 1.0, "angle_w": 0.0}
    loss = angle(u, v, labels, **weights, cosine_tau=20.0, ibn_tau=20.0, angle_tau=20.0, angle_pooling="sum")
    torch.testing.assert_close(loss, torch.tensor(case["loss"], dtype=torch.float64), rtol=0, atol=1e-10)
    grad_u, grad_v = torch.autograd.grad(loss, [u, v])
    reference = torch.tensor(case["grad_zigzag"], dtype=torch.float64)
    torch.testing.assert_close(grad_u, reference[0::2], rtol=0, atol=1e-10)
    torch.testing.assert_close(grad_v, reference[1::2], rtol=0, atol=1e-10)


def test_raw_labels_and_unit_labels_give_different_in_batch_targets() -> None:
    """AnglE's STS-B example feeds raw 0-5 scores: every pair scored >= 1 is a positive and labels >= 2 add the code's
    label-multiplied extra targets; the same scores / 5 make only the pair scored 5 a positive."""
    raw = torch.tensor([2.0, 1.0, 0.4, 5.0])
    targets = in_batch_targets(raw)
    # row 0 (pair 0, label 2): partner 1 (1·2 = 2), and sentence 2 of pair 1 (2·1 = 2); row 2 (pair 1, label 1): its
    # partner 3 only (3·1); pair 2 (label 0.4 → 0) has no targets; row 6 (pair 3, label 5): partner 7 (7·5 = 35)
    assert targets[0].nonzero().flatten().tolist() == [1, 2]
    assert targets[2].nonzero().flatten().tolist() == [3]
    assert not targets[4:6].any()
    assert targets[6].nonzero().flatten().tolist() == [7]
    unit = in_batch_targets(raw / 5)
    assert unit.nonzero().tolist() == [[6, 7], [7, 6]]
