"""Loss edge cases (batch of 2, identical embeddings, tiny tau), errors, and the loss= config group."""

from __future__ import annotations

import functools
import inspect
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import as_built, naive_info_nce
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from cl_bench.config import build_spec
from cl_bench.config.catalog import CONF_DIR
from cl_bench.losses.contrastive import contrastive
from cl_bench.losses.debiased import debiased
from cl_bench.losses.hard_negative import hard_negative
from cl_bench.losses.infonce import info_nce
from cl_bench.losses.lifted import lifted
from cl_bench.losses.nce import nce
from cl_bench.losses.npair import npair
from cl_bench.losses.ntxent import ntxent
from cl_bench.losses.similarity import cosine_logits
from cl_bench.losses.snn import snn
from cl_bench.losses.supcon import supcon
from cl_bench.losses.triplet import triplet
from cl_bench.train.loop import build_loss

CONF_LOSS = Path(__file__).resolve().parents[2] / "conf" / "loss"
ALL_LOSSES = [
    info_nce,
    ntxent,
    nce,
    contrastive,
    triplet,
    lifted,
    npair,
    snn,
    debiased,
    hard_negative,
    supcon,
]
TAU_LOSSES = [info_nce, ntxent, nce, npair, snn, debiased, hard_negative, supcon]
OPTIONS = [
    "infonce",
    "ntxent",
    "nce",
    "contrastive",
    "triplet",
    "lifted",
    "npair",
    "snn",
    "debiased",
    "hard_negative",
    "supcon",
    "mixcse",
]


def _composed_loss(option: str, *overrides: str) -> DictConfig:
    """The ``loss`` node a run composes for ``loss=<option>`` (its YAML over its spec's schema)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"loss={option}", *overrides]).loss


def _leaves(*tensors: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in tensors]


@pytest.mark.parametrize("loss_fn", ALL_LOSSES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("with_hard", [False, True], ids=["inbatch", "hardneg"])
def test_batch_of_two_is_finite(loss_fn, with_hard: bool) -> None:
    gen = torch.Generator().manual_seed(0)
    a, p, h = _leaves(*(torch.randn(2, 8, generator=gen) for _ in range(3)))
    value = as_built(loss_fn)(a, p, h if with_hard else None)
    value.backward()
    assert value.dim() == 0 and torch.isfinite(value)
    assert value.item() >= 0 or loss_fn is npair  # every loss here is a non-negative risk
    for t in (a, p) + ((h,) if with_hard else ()):
        assert torch.isfinite(t.grad).all()


# Closed forms when every embedding is the same unit vector (N = 4, no hard negatives).
N = 4
IDENTICAL = {
    "info_nce": (info_nce, {"tau": 0.05}, math.log(N)),
    "ntxent": (ntxent, {"tau": 0.05}, math.log(2 * N - 1)),
    "supcon": (supcon, {"tau": 0.05}, math.log(2 * N - 1)),
    "snn": (snn, {"tau": 0.1}, math.log(2 * N - 1)),
    "contrastive": (contrastive, {"margin": 1.0}, (N - 1) / N),
    "triplet": (triplet, {"margin": 0.2}, 0.2),
    "lifted": (lifted, {"margin": 1.0}, (1.0 + math.log(2 * (N - 1))) ** 2 / 2),
    "debiased": (debiased, {"tau": 0.05, "tau_plus": 0.1}, math.log(N)),
    "hard_negative": (hard_negative, {"tau": 0.05, "beta": 1.0, "tau_plus": 0.1}, math.log(N)),
    "nce": (
        nce,
        {"tau": 0.5},
        # l = 1/tau - log(k q), k = N-1 noise samples, q = 1/N
        math.log1p(math.exp(-(2.0 - math.log((N - 1) / N))))
        + (N - 1) * math.log1p(math.exp(2.0 - math.log((N - 1) / N))),
    ),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("name", sorted(IDENTICAL))
def test_identical_embeddings_give_the_closed_form(name: str, dtype: torch.dtype) -> None:
    loss_fn, kwargs, expected = IDENTICAL[name]
    a, p = _leaves(torch.ones(N, 6, dtype=dtype), torch.ones(N, 6, dtype=dtype))
    value = as_built(loss_fn)(a, p, **kwargs)
    value.backward()
    # fp32 cosines of equal unit vectors are 1 - 6e-8, i.e. distances of ~3e-4 after the square root.
    assert value.item() == pytest.approx(expected, rel=1e-3 if dtype == torch.float32 else 1e-9)
    assert torch.isfinite(a.grad).all() and torch.isfinite(p.grad).all()


def test_identical_embeddings_npair_closed_form() -> None:
    a, p = _leaves(torch.full((N, 4), 0.5), torch.full((N, 4), 0.5))  # |x|^2 = 1
    value = npair(a, p, tau=1.0, l2_reg=0.1)
    assert value.item() == pytest.approx(math.log(N) + 0.1 * 2.0, rel=1e-6)


@pytest.mark.parametrize("loss_fn", TAU_LOSSES, ids=lambda f: f.__name__)
def test_tiny_tau_does_not_overflow(loss_fn) -> None:
    gen = torch.Generator().manual_seed(1)
    a, p, h = _leaves(*(torch.randn(6, 16, generator=gen) for _ in range(3)))
    value = as_built(loss_fn)(a, p, h, tau=1e-4)
    value.backward()
    assert torch.isfinite(value)
    for t in (a, p, h):
        assert torch.isfinite(t.grad).all()


def test_tiny_tau_infonce_matches_naive_log_sum_exp_reference() -> None:
    gen = torch.Generator().manual_seed(2)
    a, p = (torch.randn(5, 8, generator=gen) for _ in range(2))
    value = as_built(info_nce)(a, p, tau=1e-4)
    expected = naive_info_nce(a.double(), p.double(), [], list(range(5)), tau=1e-4)
    assert value.item() > 100  # at this temperature any misranked negative costs thousands
    assert value.item() == pytest.approx(expected.item(), rel=1e-4)


def test_debiased_without_prior_tends_to_infonce_at_tiny_tau() -> None:
    gen = torch.Generator().manual_seed(3)
    a, p = (torch.randn(5, 8, generator=gen) for _ in range(2))
    # The clamp N e^{-1/tau} vanishes, so tau_plus = 0 leaves plain InfoNCE.
    assert as_built(debiased)(a, p, tau=1e-3, tau_plus=0.0).item() == pytest.approx(
        as_built(info_nce)(a, p, tau=1e-3).item(), rel=1e-5
    )
    assert as_built(hard_negative)(a, p, tau=1e-3, beta=0.0, tau_plus=0.0).item() == pytest.approx(
        as_built(info_nce)(a, p, tau=1e-3).item(), rel=1e-5
    )


def test_info_nce_without_labels_is_cross_entropy() -> None:
    gen = torch.Generator().manual_seed(4)
    a, p, h = (torch.randn(7, 8, generator=gen) for _ in range(3))
    logits = torch.cat([cosine_logits(a, p, 0.05), cosine_logits(a, h, 0.05)], dim=1)
    expected = F.cross_entropy(logits, torch.arange(7))
    torch.testing.assert_close(as_built(info_nce)(a, p, h, tau=0.05), expected)


def test_symmetric_losses_agree_without_labels() -> None:
    gen = torch.Generator().manual_seed(5)
    a, p, h = (torch.randn(6, 8, generator=gen) for _ in range(3))
    reference = ntxent(a, p, h, tau=0.07)
    torch.testing.assert_close(as_built(supcon)(a, p, h, tau=0.07), reference)
    # On unit vectors -|x-y|^2/(2 tau) = cos/tau - 1/tau: the constant cancels.
    torch.testing.assert_close(as_built(snn)(a, p, h, tau=0.14), reference)
    torch.testing.assert_close(debiased(a, p, h, tau=0.07, tau_plus=0.0, symmetric=True), reference)


def test_labels_change_supervised_losses() -> None:
    gen = torch.Generator().manual_seed(6)
    a, p = (torch.randn(6, 8, generator=gen) for _ in range(2))
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    for loss_fn in (supcon, snn, info_nce, triplet):
        assert as_built(loss_fn)(a, p, labels=labels).item() != pytest.approx(as_built(loss_fn)(a, p).item())
    # Distinct labels reproduce the pair structure exactly.
    torch.testing.assert_close(as_built(supcon)(a, p, labels=torch.arange(6) * 7), as_built(supcon)(a, p))


def test_low_precision_inputs_are_computed_in_float32() -> None:
    a, p = torch.randn(4, 8).bfloat16(), torch.randn(4, 8).bfloat16()
    for loss_fn in ALL_LOSSES:
        assert as_built(loss_fn)(a, p).dtype == torch.float32


def test_triplet_random_mining_is_seeded_and_never_harder_than_hardest() -> None:
    gen = torch.Generator().manual_seed(7)
    a, p = (torch.randn(6, 8, generator=gen) for _ in range(2))
    first = as_built(triplet)(a, p, mining="random", margin=1.0, generator=torch.Generator().manual_seed(11))
    again = as_built(triplet)(a, p, mining="random", margin=1.0, generator=torch.Generator().manual_seed(11))
    hardest = as_built(triplet)(a, p, mining="hardest", margin=1.0)
    assert first.item() == again.item()
    assert first.item() <= hardest.item() + 1e-7
    # With two pairs each anchor has exactly one negative: random = hardest.
    a2, p2 = a[:2], p[:2]
    assert as_built(triplet)(
        a2, p2, mining="random", generator=torch.Generator().manual_seed(0)
    ).item() == pytest.approx(as_built(triplet)(a2, p2, mining="hardest").item())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a, p: as_built(info_nce)(a, p[:3]), "anchors and positives must both be (N, D)"),
        (lambda a, p: as_built(supcon)(a, p, labels=[0, 1]), "labels: expected one label per anchor"),
        (lambda a, p: as_built(supcon)(a, p, labels=torch.rand(4)), "labels: expected integer class labels"),
        (lambda a, p: as_built(info_nce)(a, p, torch.randn(4, 3)), "hard_negatives must be (K, 8)"),
        (
            lambda a, p: as_built(info_nce)(a, p, torch.randn(2, 8), hard_negative_alpha=2.0),
            "one hard negative per anchor",
        ),
        (lambda a, p: as_built(triplet)(a, p, mining="semi"), "loss.mining: must be one of hardest, random"),
        (lambda a, p: as_built(supcon)(a, p, contrast_mode="none"), "loss.contrast_mode: must be one of all, one"),
    ],
)
def test_bad_inputs_fail_with_one_line(call, message: str) -> None:
    """What depends on the tensors or on a choice the function dispatches on (a key's range is its spec's rule:
    tests/losses/test_loss_specs.py)."""
    a, p = torch.randn(4, 8), torch.randn(4, 8)
    with pytest.raises(ValueError) as err:
        call(a, p)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_every_option_has_a_yaml_and_nothing_else() -> None:
    """The pair losses (the other kinds are their methods' objectives, tested with them)."""
    from cl_bench.config import catalog

    assert sorted(catalog.losses_of_kinds(("pair",))) == sorted(OPTIONS)
    assert all(f"name: {o}\n" in (CONF_LOSS / f"{o}.yaml").read_text() for o in OPTIONS)


@pytest.mark.parametrize("option", OPTIONS)
def test_loss_yaml_is_valid_and_builds_a_working_partial(option: str) -> None:

    text = (CONF_LOSS / f"{option}.yaml").read_text()
    node = _composed_loss(option)
    spec = build_spec(node, "loss")
    assert node._partial_ is True and node.name == option
    loss_fn = build_loss(spec)
    assert isinstance(loss_fn, functools.partial)
    params = inspect.signature(loss_fn.func).parameters
    assert list(params)[:3] == ["anchors", "positives", "hard_negatives"]
    assert params["labels"].kind is inspect.Parameter.KEYWORD_ONLY and params["labels"].default is None
    if "tau" in params:
        assert "tau" in node, f"{option}: temperature must be configurable as loss.tau"
    else:
        assert "tau" not in node and "ignores temperature" in text
    value = loss_fn(torch.randn(4, 8, requires_grad=True), torch.randn(4, 8))
    value.backward()
    assert torch.isfinite(value)


def test_loss_tau_override_reaches_the_function() -> None:

    node = _composed_loss("ntxent", "loss.tau=0.5")
    a, p = torch.randn(4, 8), torch.randn(4, 8)
    assert build_loss(build_spec(node, "loss"))(a, p).item() == pytest.approx(ntxent(a, p, tau=0.5).item())
