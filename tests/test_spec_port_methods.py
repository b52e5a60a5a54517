"""Port test (transitional): every method's spec (:mod:`cl_bench.methods.specs`) says and decides what the
method class's old declarations do (class attributes, ``check_config``, ``inert_keys``, ``check_setting``,
``supplied_inputs`` with :class:`cl_bench.methods.base.RunSetting`).

It goes when the old classmethods go. For every ``conf/method/*.yaml`` it builds the spec from the YAML's
values and compares, over a grid of values (the YAML's, each key changed alone, and pairs of changes) and of
run settings (augmentation none/dropout/text/cutoff, dropout 0/0.1, pooler cls/avg with mlp_only_train
true/false, each loss the method takes), the spec's answers with the old ones: the same keys, the same
exception type and byte-identical message, or neither raises.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import itertools
import subprocess
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cl_bench.augment.base import rewrites_text
from cl_bench.losses import KIND_ATTR
from cl_bench.methods.base import RunSetting as OldRunSetting
from cl_bench.specs import MethodSpec, spec_for
from cl_bench.specs import RunSetting as NewRunSetting

CONF = Path(__file__).resolve().parents[1] / "conf"
METHOD_YAMLS = sorted((CONF / "method").glob("*.yaml"))
#: keys of a YAML option that are not its config keys
NOT_KEYS = ("_target_", "_partial_", "defaults")
#: the class attributes a method spec carries as ClassVars
DECLARED = ("uses", "loss_kinds", "supplies", "summary", "encodes_views", "own_prompts", "takes_prompts")
#: augmentation options in the settings grid: none, dropout, a text one, two embedding-level ones
AUGMENTATIONS = (None, "dropout", "eda_delete", "negation", "token_cutoff")
#: (data.train_file, model_type of a local checkpoint) pairs in the settings grid
DATA_AND_MODEL = (("", None), ("/data/SNLI/s1.train", "bert"), ("/data/stsbenchmark/sts-train.csv", "roberta"),
                  ("/data/wiki1m_for_simcse.txt", None))


def option_values(path: Path) -> dict[str, Any]:
    """A YAML option's config keys and values (``_target_``, ``_partial_`` and ``defaults`` left out)."""
    return {k: v for k, v in yaml.safe_load(path.read_text()).items() if k not in NOT_KEYS}


def import_target(target: str) -> Any:
    module, _, name = target.rpartition(".")
    return getattr(importlib.import_module(module), name)


def target_of(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["_target_"])


@dataclass(frozen=True)
class LossStandIn:
    """A loss spec's answers where its spec is not registered yet (another family's spec, written in parallel)."""

    name: str
    kind: str | None
    inputs: frozenset[str]
    target: str


@dataclass(frozen=True)
class AugmentationStandIn:
    """An augmentation spec's answers where its spec is not registered yet."""

    name: str
    rewrites_text: bool
    embedding_level: bool


def loss_pair(name: str) -> tuple[dict[str, Any], Any]:
    """The old RunSetting's loss fields and the new RunSetting's loss spec for ``conf/loss/<name>.yaml``."""
    path = CONF / "loss" / f"{name}.yaml"
    target, values = target_of(path), option_values(path)
    fn = import_target(target)
    keyword_only = frozenset(p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY)
    old = {"loss_kind": getattr(fn, KIND_ATTR, None), "loss_inputs": keyword_only, "loss_function": fn.__name__}
    spec_cls = spec_for(target, import_target=False)
    if spec_cls is not None:
        return old, spec_cls(**values)
    return old, LossStandIn(str(values["name"]), old["loss_kind"], keyword_only - set(values), target)


def augmentation_pair(name: str | None) -> tuple[type | None, Any]:
    """The old RunSetting's augmentation class and the new RunSetting's augmentation spec."""
    if name is None:
        return None, None
    path = CONF / "augmentation" / f"{name}.yaml"
    target, values = target_of(path), option_values(path)
    cls = import_target(target)
    spec_cls = spec_for(target, import_target=False)
    if spec_cls is not None:
        return cls, spec_cls(**values)
    return cls, AugmentationStandIn(cls.name, rewrites_text(cls), bool(cls.embedding_level))


def losses_taken(method_cls: Any) -> list[str]:
    """The ``conf/loss`` options whose kind the method takes."""
    names = []
    for path in sorted((CONF / "loss").glob("*.yaml")):
        fn = import_target(target_of(path))
        if getattr(fn, KIND_ATTR, None) in method_cls.loss_kinds:
            names.append(path.stem)
    return names


def settings(method_cls: Any) -> list[tuple[OldRunSetting, NewRunSetting]]:
    """The grid of run settings, each as the old and the new RunSetting."""
    losses = [(None, None)] + [loss_pair(name) for name in losses_taken(method_cls)]
    augmentations = [augmentation_pair(name) for name in AUGMENTATIONS]
    grid = []
    for (old_loss, new_loss), (aug_cls, aug_spec), dropout, (pooler, mlp_only_train), (train_file, model_type) in (
        itertools.product(losses, augmentations, (None, 0.0, 0.1), (("cls", True), ("cls", False), ("avg", True),
                                                                    ("avg", False)), DATA_AND_MODEL)
    ):
        shared = {"train_file": train_file, "dropout": dropout, "pooler": pooler, "mlp_only_train": mlp_only_train,
                  "model_type": model_type}
        old = OldRunSetting(augmentation=aug_cls, **shared, **(old_loss or {}))
        new = NewRunSetting(augmentation=aug_spec, loss=new_loss, **shared)
        grid.append((old, new))
    return grid


def key_variants(key: str, value: Any, optional: bool) -> list[Any]:
    """Values of one key worth checking: the YAML's, bools flipped, zero/negative/other numbers, bad choices,
    empty and bad lists, None where the key may be null."""
    out: list[Any] = []
    if isinstance(value, bool):
        out += [not value]
    elif isinstance(value, int):
        out += [0, -1, 1, 2, 3, 2048, value + 1]
    elif isinstance(value, float):
        out += [0.0, -0.5, 0.5, 1.0, 1.5, 2]
    elif isinstance(value, str):
        out += ["bogus", "/nonexistent/model", 'only "[X]" here', "[X] means [MASK]", "avg", "nli", "mlm_transform",
                "trainer", "masked", "mlp", "random", "mlp_dot", "none", "f", "mean", "adjacent", "plain"]
    elif isinstance(value, list):
        out += [[], [0], [-1, 3], [2], [4, 2], ["dev"], "bogus", 5]
    if optional or value is None:
        out += [None]
    if value is None:
        out += [0, 1, -1, 2048, [1, 2], ["train"], "bogus", "/nonexistent/model", ""]
    return [v for v in out if not (type(v) is type(value) and v == value)]


def value_grid(values: dict[str, Any], types_: dict[str, Any], pairs: bool) -> list[dict[str, Any]]:
    """The YAML's values, each key changed alone and (``pairs``) each pair of keys changed together."""
    changes = {k: key_variants(k, v, optional_type(types_[k])) for k, v in values.items() if k != "name"}
    grid = [dict(values)]
    for key, options in changes.items():
        grid += [{**values, key: option} for option in options]
    if pairs:
        for (k1, o1), (k2, o2) in itertools.combinations(changes.items(), 2):
            grid += [{**values, k1: a, k2: b} for a in o1 for b in o2]
    return grid


def optional_type(hint: Any) -> bool:
    return type(None) in typing.get_args(hint)


def outcome(call: Any, *args: Any) -> tuple[str, Any]:
    """What ``call(*args)`` gives: its value, or its exception's type and message."""
    try:
        return "value", call(*args)
    except Exception as err:  # noqa: BLE001 (any exception: the old and new must raise the same)
        return type(err).__name__, str(err)


def fits(value: Any, hint: Any) -> bool:
    """Whether a YAML value fits a spec field's declared type (int fits float, as YAML writes 1 for 1.0)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(fits(v, item) for v in value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


@pytest.fixture(params=METHOD_YAMLS, ids=[p.stem for p in METHOD_YAMLS])
def method_option(request: pytest.FixtureRequest) -> tuple[dict[str, Any], type[MethodSpec], Any]:
    """One ``conf/method`` option: its values, its spec class, its (old) method class."""
    path = request.param
    target = target_of(path)
    spec_cls = spec_for(target, import_target=False)
    assert spec_cls is not None, f"{path.name}: no spec registered for {target} in cl_bench.methods.specs"
    assert issubclass(spec_cls, MethodSpec) and spec_cls.__module__ == "cl_bench.methods.specs"
    return option_values(path), spec_cls, import_target(target)


def test_the_method_specs_import_no_torch() -> None:
    code = ("import sys, cl_bench.methods.specs, cl_bench.specs as s; s.registered(); "
            "heavy = [m for m in ('torch', 'transformers', 'sklearn', 'numpy') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_spec_keys_are_the_yaml_keys_and_the_target_parameters(method_option: Any) -> None:
    values, spec_cls, method_cls = method_option
    assert set(spec_cls.keys()) == set(values)
    parameters = set(inspect.signature(method_cls.__init__).parameters) - {"self", "context"}
    assert parameters == set(values) - {"name"}
    types_ = spec_cls.types()
    assert {k: v for k, v in values.items() if not fits(v, types_[k])} == {}
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               for f in dataclasses.fields(spec_cls)), "the YAML holds the values: no defaults in a spec"


def test_spec_classvars_are_the_class_attributes(method_option: Any) -> None:
    _, spec_cls, method_cls = method_option
    assert {a: getattr(spec_cls, a) for a in DECLARED} == {a: getattr(method_cls, a) for a in DECLARED}


def test_check_answers_as_check_config(method_option: Any) -> None:
    values, spec_cls, method_cls = method_option
    grid = value_grid(values, spec_cls.types(), pairs=True)
    mismatches = []
    for case in grid:
        old = outcome(method_cls.check_config, dict(case))
        new = outcome(lambda values: spec_cls(**values).check(), case)
        if old != new:
            mismatches.append((case, old, new))
    assert mismatches == [], mismatches[:3]
    assert any(outcome(lambda values: spec_cls(**values).check(), case)[0] != "value" for case in grid)


def test_setting_answers_as_the_old_classmethods(method_option: Any) -> None:
    values, spec_cls, method_cls = method_option
    grid = settings(method_cls)
    mismatches = []
    for case in value_grid(values, spec_cls.types(), pairs=False):  # also values check() rejects (a model not here)
        spec = spec_cls(**case)
        if outcome(method_cls.supplied_inputs, dict(case)) != outcome(spec.supplied_inputs):
            mismatches.append(("supplied_inputs", case))
        for old_setting, new_setting in grid:
            for rule in ("inert_keys", "check_setting"):
                old = outcome(getattr(method_cls, rule), dict(case), old_setting)
                new = outcome(getattr(spec, rule), new_setting)
                if old != new:
                    mismatches.append((rule, case, old_setting, old, new))
    assert mismatches == [], mismatches[:3]
