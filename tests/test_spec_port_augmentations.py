"""Port check (transitional, issue 36): every ``augmentation=`` option's spec (:mod:`cl_bench.augment.specs`)
says what the old class declarations say.

For each ``conf/augmentation/*.yaml`` (and the SimCSE Table 1 presets of ``conf/augmentation/simcse_table1/``,
which set other values of the same options) the spec registered under its ``_target_`` must match the
:class:`~cl_bench.augment.base.Augmentation` class: ``name``, ``embedding_level`` and ``rewrites_text`` equal
the class's; the spec's keys are the YAML's keys and the constructor's parameters. For the YAML's values and a
grid of variants (each bool flipped, zero/negative/other numbers, every valid choice and a bad one, files
present and missing, and every pair of those changes), :meth:`check` raises the same error as the old
constructor (with its ``check_config``), or neither raises, and :meth:`runs_model_in_training` answers as the
old classmethod; the new :class:`cl_bench.specs.RunSetting` holding the spec gives the old setting's
``augmentation_name``, ``rewrites_text`` and ``embedding_level``. Deleted with the old class attributes.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import json
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from cl_bench.augment import specs as augment_specs
from cl_bench.augment.base import rewrites_text
from cl_bench.methods.base import RunSetting as OldRunSetting
from cl_bench.specs import AugmentationSpec, RunSetting, registered, spec_for

AUGMENTATION_DIR = Path(__file__).resolve().parents[1] / "conf" / "augmentation"
OPTIONS = sorted(path.stem for path in AUGMENTATION_DIR.glob("*.yaml"))
PRESETS = sorted(path.stem for path in (AUGMENTATION_DIR / "simcse_table1").glob("*.yaml"))
#: the valid values of each choice key (the bad one is added below)
CHOICES: dict[str, tuple[str, ...]] = {"dup_type": augment_specs.DUP_TYPES}
#: the interpolations of back_translation.yaml, as a composed run resolves them
INTERPOLATIONS = {"${data.train_file}": "data/corpus/wiki1m_for_simcse.txt", "${data.limit}": None}


def raw_node(option: str) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.load(AUGMENTATION_DIR / f"{option}.yaml"), resolve=False)  # type: ignore[return-value]


def config_values(option: str) -> dict[str, Any]:
    """The option's config keys and values (no ``_target_``), its interpolations resolved."""
    return {k: INTERPOLATIONS.get(v, v) if isinstance(v, str) else v
            for k, v in raw_node(option).items() if k not in ("_target_", "_partial_", "defaults")}


def preset(name: str) -> tuple[str, dict[str, Any]]:
    """A SimCSE Table 1 preset: the option it picks and that option's values with the preset's."""
    node = raw_node(f"simcse_table1/{name}")
    (choice,) = [entry for entry in node["defaults"] if entry != "_self_"]
    option = choice.removeprefix("/augmentation/").removesuffix("@augmentation")
    return option, {**config_values(option), **node.get("augmentation", {})}


def augmentation_class(option: str) -> type:
    module, _, name = raw_node(option)["_target_"].rpartition(".")
    return getattr(importlib.import_module(module), name)


def spec_class(option: str) -> type[AugmentationSpec]:
    cls = spec_for(raw_node(option)["_target_"], import_target=False)
    assert cls is not None and issubclass(cls, AugmentationSpec), f"{option}: no augmentation spec"
    return cls


def variants(key: str, value: Any, negation_file: str) -> list[Any]:
    """Other values of one key: the bool flipped; zero, negative and other numbers; choices; files."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [0, -1, 1, 2]
    if isinstance(value, float):
        return [0.0, -1.0, 0.5, 1.0, 2.0]
    if key == "source":
        return ["auto", "models", "file", "rules", "bogus"]
    if key == "file":
        return [negation_file, "missing.jsonl", ""]
    if key == "limit":
        return [10, 0]
    if value is None:
        return ["x"]
    if isinstance(value, str):
        return [choice for choice in CHOICES.get(key, ()) if choice != value] + ["bogus", None]
    raise AssertionError(f"no variants for {key}={value!r}")


def value_grid(values: dict[str, Any], negation_file: str) -> list[dict[str, Any]]:
    """The values, each one-key change, and each two-key change."""
    changes = [(key, other) for key, value in values.items() for other in variants(key, value, negation_file)]
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


@pytest.fixture()
def negation_file(tmp_path: Path) -> str:
    path = tmp_path / "negations.jsonl"
    path.write_text(json.dumps(["It works.", "It does not work."]) + "\n")
    return str(path)


@pytest.mark.parametrize("option", OPTIONS)
def test_declarations_match(option: str) -> None:
    node, cls, aug = raw_node(option), spec_class(option), augmentation_class(option)
    assert cls.target == node["_target_"]
    values = config_values(option)
    parameters = list(inspect.signature(aug).parameters)  # the constructor's, as Hydra calls it
    assert set(cls.keys()) == set(values) == set(parameters), option
    assert cls.name == aug.name
    assert cls.embedding_level == aug.embedding_level
    assert cls.rewrites_text == rewrites_text(aug)
    types_ = cls.types()
    for key, value in values.items():
        assert fits(value, types_[key]), f"{option}: {key}={value!r} does not fit {types_[key]}"


@pytest.mark.parametrize("option", OPTIONS)
def test_check_and_model_use_as_the_old_class(option: str, negation_file: str) -> None:
    cls, aug = spec_class(option), augmentation_class(option)
    for values in value_grid(config_values(option), negation_file):
        spec = cls(**values)
        assert error_of(spec.check) == error_of(functools.partial(aug, **values)), f"{option}: {values}"
        assert spec.runs_model_in_training() == aug.runs_model_in_training(values), f"{option}: {values}"


@pytest.mark.parametrize("name", PRESETS)
def test_simcse_table1_presets(name: str) -> None:
    """The presets' values build the spec of the option they pick, and pass its check as the old constructor."""
    option, values = preset(name)
    spec = spec_class(option)(**values)
    spec.check()
    augmentation_class(option)(**values)


@pytest.mark.parametrize("option", OPTIONS)
def test_run_setting_reads_the_spec(option: str) -> None:
    spec = spec_class(option)(**config_values(option))
    new, old = RunSetting(augmentation=spec), OldRunSetting(augmentation=augmentation_class(option))
    assert (new.augmentation_name, new.rewrites_text, new.embedding_level) == (
        old.augmentation_name, old.rewrites_text, old.embedding_level)


def test_every_augmentation_spec_has_an_option() -> None:
    """No spec without a ``conf/augmentation`` option (a spec describes an option that exists)."""
    targets = {raw_node(option)["_target_"] for option in OPTIONS}
    specs = {target for target, cls in registered().items()
             if issubclass(cls, AugmentationSpec) and cls.__module__ == augment_specs.__name__}
    assert specs == targets
