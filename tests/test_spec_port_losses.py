"""Port check (transitional, issue 36): every ``loss=`` option's spec (:mod:`cl_bench.losses.specs`) says what
the old declarations say.

For each ``conf/loss/*.yaml`` the spec registered under its ``_target_`` must match the loss function: kind and
needs equal the :func:`cl_bench.losses.loss_kind` mark; the spec's keys are the YAML's keys and the function's
keyword-only parameters besides its inputs; ``inputs`` are the rest of those parameters (what the old
``RunSetting.loss_inputs`` listed that a method passes). For the YAML's values and a grid of variants (each
bool flipped, zero/negative/other numbers, every valid choice and a bad one, and every pair of those changes),
:meth:`check` raises the same error as the old checks: the function's ``check_config`` attribute where it has
one, then the function itself called with valid tensors of its kind (the value rules it applies on every
call), or neither raises. Deleted with the old marks and ``check_config`` attributes.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from cl_bench.losses import specs as loss_specs
from cl_bench.methods.base import RunSetting as OldRunSetting
from cl_bench.specs import LossSpec, RunSetting, registered, spec_for

LOSS_DIR = Path(__file__).resolve().parents[1] / "conf" / "loss"
OPTIONS = sorted(path.stem for path in LOSS_DIR.glob("*.yaml"))
#: the valid values of each choice key (the bad one is added below)
CHOICES: dict[str, tuple[str, ...]] = {
    "angle_pooling": loss_specs.ANGLE_POOLINGS,
    "mask_positive_mix": loss_specs.MASK_POSITIVE_MIX,
    "contrast_mode": loss_specs.CONTRAST_MODES,
    "mining": loss_specs.MINING,
    "similarity": loss_specs.SIMILARITIES,
    "objective": loss_specs.SG_OBJECTIVES,
}


def yaml_node(option: str) -> dict[str, Any]:
    """The option's YAML as Hydra reads it (numbers typed by OmegaConf)."""
    return OmegaConf.to_container(OmegaConf.load(LOSS_DIR / f"{option}.yaml"), resolve=True)  # type: ignore[return-value]


def config_values(option: str) -> dict[str, Any]:
    """The option's config keys and values (no ``_target_``/``_partial_``/``defaults``)."""
    return {k: v for k, v in yaml_node(option).items() if k not in ("_target_", "_partial_", "defaults")}


def loss_function(option: str) -> Callable[..., Any]:
    module, _, name = yaml_node(option)["_target_"].rpartition(".")
    return getattr(importlib.import_module(module), name)


def keyword_only(fn: Callable[..., Any]) -> set[str]:
    return {p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY}


def kind_inputs(kind: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Valid positional arguments and inputs for one call of a loss of ``kind`` (4 items, width 8)."""
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen)

    n, d = 4, 8
    if kind == "pair":
        return (rand(n, d), rand(n, d)), {}
    if kind == "guided_pair":
        return (rand(n, d), rand(n, d)), {"guide": (rand(n, d), rand(n, d))}
    if kind == "two_view":
        return (rand(n, d), rand(n, d)), {}
    if kind == "predict_target":
        return (rand(n, d), rand(n, d), rand(n, d), rand(n, d)), {}
    if kind == "swapped_prediction":
        return (rand(n, 5), rand(n, 5)), {}
    if kind == "memory_bank":
        return (rand(n, d), rand(n, d), rand(n, 3, d)), {"num_data": 100, "partition": 1.0}
    if kind == "classifier":
        return (rand(n, 3), torch.tensor([0, 1, 2, 1])), {}
    if kind == "scored_pair":
        return (rand(n, d), rand(n, d), torch.tensor([0.0, 1.0, 2.5, 4.0])), {}
    if kind == "triplet":
        return (rand(n, d), rand(n, d), rand(n, d)), {}
    if kind == "local_global":
        return (rand(n, 5, n), torch.ones(n, 5)), {}
    if kind == "queue":
        return (rand(n, d), rand(n, d), rand(6, d)), {}
    if kind == "soft_negative":
        return (rand(n, d), rand(n, d), rand(n, d)), {}
    if kind == "neighbour":
        targets = torch.zeros(n, n)
        targets[torch.arange(n), (torch.arange(n) + 1) % n] = 1.0
        return (rand(n, d), rand(n, d), targets), {}
    if kind == "self_guided":
        return (rand(n, d), rand(n, 3, d), torch.tensor([0, 1, 2, 0])), {}
    raise AssertionError(f"no inputs for kind {kind}")


def variants(key: str, value: Any) -> list[Any]:
    """Other values of one key: the bool flipped; zero, negative and other numbers; every choice and a bad one."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [0, -1, 1, 2]
    if isinstance(value, float) or value is None:
        return [0.0, -1.0, 0.5, 1.0, 2.0]
    if isinstance(value, str):
        return [choice for choice in CHOICES.get(key, ()) if choice != value] + ["bogus"]
    raise AssertionError(f"no variants for {key}={value!r}")


def value_grid(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The YAML's values, each one-key change, and each two-key change."""
    changes = [(key, other) for key, value in values.items() if key != "name" for other in variants(key, value)]
    grid = [dict(values)] + [{**values, key: other} for key, other in changes]
    for (key_a, a), (key_b, b) in itertools.combinations(changes, 2):
        if key_a != key_b:
            grid.append({**values, key_a: a, key_b: b})
    return grid


def error_of(call: Callable[[], Any]) -> tuple[str, str] | None:
    try:
        call()
    except Exception as err:  # noqa: BLE001 (the type and message are what is compared)
        return type(err).__name__, str(err)
    return None


def old_error(fn: Callable[..., Any], values: dict[str, Any]) -> tuple[str, str] | None:
    """The first error of the old checks: ``check_config`` (run before any model loads), then the call."""
    params = {k: v for k, v in values.items() if k != "name"}
    check = getattr(fn, "check_config", None)
    if check is not None and (err := error_of(lambda: check(params))):
        return err
    args, inputs = kind_inputs(fn.loss_kind)
    return error_of(lambda: fn(*args, **inputs, **params))


def fits(value: Any, annotation: Any) -> bool:
    """Whether a YAML value fits a spec field's declared type."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(fits(value, arm) for arm in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


@pytest.mark.parametrize("option", OPTIONS)
def test_declarations_match(option: str) -> None:
    node, fn = yaml_node(option), loss_function(option)
    cls = spec_for(node["_target_"], import_target=False)
    assert cls is not None and issubclass(cls, LossSpec), f"{option}: no loss spec for {node['_target_']}"
    assert cls.target == node["_target_"]
    values = config_values(option)
    assert set(cls.keys()) == set(values), option
    assert cls.kind == fn.loss_kind
    assert dict(cls.needs) == fn.loss_needs
    parameters = keyword_only(fn)
    assert cls.inputs == parameters - set(values), option
    assert set(cls.keys()) - {"name"} == parameters - cls.inputs, option
    types_ = cls.types()
    for key, value in values.items():
        assert fits(value, types_[key]), f"{option}: {key}={value!r} does not fit {types_[key]}"


@pytest.mark.parametrize("option", OPTIONS)
def test_check_raises_as_the_old_checks(option: str) -> None:
    cls = spec_for(yaml_node(option)["_target_"], import_target=False)
    fn = loss_function(option)
    assert cls is not None
    for values in value_grid(config_values(option)):
        spec = cls(**values)
        assert error_of(spec.check) == old_error(fn, values), f"{option}: {values}"


@pytest.mark.parametrize("option", OPTIONS)
def test_run_setting_reads_the_spec(option: str) -> None:
    """``loss_kind``, ``loss_inputs`` (the method-supplied part) and the option's name, as the old setting had them."""
    fn, values = loss_function(option), config_values(option)
    spec = spec_for(yaml_node(option)["_target_"], import_target=False)(**values)  # type: ignore[misc]
    new = RunSetting(loss=spec)
    old = OldRunSetting(loss_kind=fn.loss_kind, loss_inputs=frozenset(keyword_only(fn)), loss_function=fn.__name__)
    assert new.loss_kind == old.loss_kind
    assert new.loss_inputs == old.loss_inputs - set(values)
    assert new.loss_name == values["name"] == option


def test_every_loss_spec_has_an_option() -> None:
    """No spec without a ``conf/loss`` option (a spec describes an option that exists)."""
    targets = {yaml_node(option)["_target_"] for option in OPTIONS}
    specs = {target for target, cls in registered().items() if issubclass(cls, LossSpec) and cls.__module__ == loss_specs.__name__}
    assert specs == targets
