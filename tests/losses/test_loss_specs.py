"""The losses' specs: every key declared once (type, default, rule, doc) and checked by the one checker.

A key's range is declared on its spec's field and :meth:`cl_bench.specs.Spec.check` rejects a value outside it in one
line; the loss functions take the spec's values (no default, no rule of their own), and an option's YAML sets only
what differs from its spec's defaults.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect

import pytest
import yaml

from cl_bench.config.catalog import CONF_DIR
from cl_bench.losses import specs as loss_specs
from cl_bench.specs import LossSpec, field_rules, registered

LOSS_SPECS = sorted((s for s in registered().values() if issubclass(s, LossSpec)
                     and s.__module__ == loss_specs.__name__), key=lambda s: s.__name__)
#: the numeric keys that take any value (SNCSE's margins and weight: the official code bounds none of them)
UNBOUNDED = {("SNCSESpec", "alpha"), ("SNCSESpec", "beta"), ("SNCSESpec", "bml_weight")}


def _function(spec: type[LossSpec]):
    module, _, name = spec.target.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _numeric(spec: type[LossSpec], key: str) -> bool:
    base = str(spec.__dataclass_fields__[key].type)
    return any(word in base for word in ("float", "int", "Temperature", "Scale", "Margin", "Weight", "ClassPrior"))


def test_every_builtin_loss_option_has_its_spec_here() -> None:
    targets = {yaml.safe_load(path.read_text())["_target_"] for path in (CONF_DIR / "loss").glob("*.yaml")}
    assert targets == {spec.target for spec in LOSS_SPECS}


@pytest.mark.parametrize("spec", LOSS_SPECS, ids=lambda s: s.__name__)
def test_every_numeric_key_declares_its_rule_and_every_key_a_default(spec: type[LossSpec]) -> None:
    rules = field_rules(spec)
    for f in dataclasses.fields(spec):
        if f.name == "name":
            continue
        assert f.default is not dataclasses.MISSING, f"{spec.__name__}.{f.name}: no default"
        if _numeric(spec, f.name) and (spec.__name__, f.name) not in UNBOUNDED:
            assert rules[f.name], f"{spec.__name__}.{f.name}: a number without a declared rule"
    spec(name="x").check()  # the defaults pass their own rules


@pytest.mark.parametrize("spec", LOSS_SPECS, ids=lambda s: s.__name__)
def test_the_function_takes_the_specs_values_without_defaults_of_its_own(spec: type[LossSpec]) -> None:
    params = inspect.signature(_function(spec)).parameters
    for key in spec.keys():
        if key == "name":
            continue
        assert key in params, f"{spec.target} takes no {key}"
        assert params[key].default is inspect.Parameter.empty, f"{spec.target}: a second default for {key}"
        assert params[key].kind is inspect.Parameter.KEYWORD_ONLY, f"{spec.target}: {key} is not keyword-only"


@pytest.mark.parametrize(("spec", "changes", "message"), [
    (loss_specs.InfoNCESpec, {"tau": 0.0}, "loss.tau: must be > 0, got 0.0"),
    (loss_specs.NTXentSpec, {"tau": -1.0}, "loss.tau: must be > 0, got -1.0"),
    (loss_specs.InfoNCESpec, {"hard_negative_alpha": -0.5}, "loss.hard_negative_alpha: must be >= 0, got -0.5"),
    (loss_specs.TripletSpec, {"margin": 0.0}, "loss.margin: must be > 0, got 0.0"),
    (loss_specs.SBERTTripletSpec, {"margin": 0}, "loss.margin: must be > 0, got 0"),
    (loss_specs.DebiasedSpec, {"tau_plus": 1.0}, "loss.tau_plus: must be in [0, 1), got 1.0"),
    (loss_specs.HardNegativeSpec, {"beta": -1.0}, "loss.beta: must be >= 0, got -1.0"),
    (loss_specs.NCESpec, {"noise_prob": 0.0}, "loss.noise_prob: must be in (0, 1], got 0.0"),
    (loss_specs.NPairSpec, {"l2_reg": -0.1}, "loss.l2_reg: must be >= 0, got -0.1"),
    (loss_specs.MixCSESpec, {"lambd": 1.5}, "loss.lambd: must be in [0, 1], got 1.5"),
    (loss_specs.BarlowTwinsSpec, {"lambd": -1.0}, "loss.lambd: must be >= 0, got -1.0"),
    (loss_specs.SwAVSpec, {"epsilon": 0}, "loss.epsilon: must be > 0, got 0"),
    (loss_specs.SwAVSpec, {"sinkhorn_iterations": 0}, "loss.sinkhorn_iterations: must be >= 1, got 0"),
    (loss_specs.MemoryBankSpec, {"proximal_lambda": -1}, "loss.proximal_lambda: must be >= 0, got -1"),
    (loss_specs.CoSENTSpec, {"scale": 0}, "loss.scale: must be > 0, got 0"),
    (loss_specs.AnglESpec, {"ibn_w": -1}, "loss.ibn_w: must be >= 0, got -1"),
    (loss_specs.AnglENLISpec, {"angle_tau": 0}, "loss.angle_tau: must be > 0, got 0"),
    (loss_specs.NeighbourSpec, {"similarity": "cosine", "tau": -0.1}, "loss.tau: must be > 0, got -0.1"),
    # the rules across keys (check_combination)
    (loss_specs.NeighbourSpec, {"similarity": "cosine"}, "loss.tau: similarity=cosine needs a temperature"),
    (loss_specs.SNCSESpec, {"alpha": 0.3, "beta": 0.1}, "loss.beta: must be >= loss.alpha, got alpha=0.3, beta=0.1"),
])
def test_a_bad_value_is_one_line_naming_the_key(spec: type[LossSpec], changes: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        spec(name="x", **changes).check()
    assert str(err.value) == message


def test_neighbour_dot_needs_no_temperature() -> None:
    loss_specs.NeighbourSpec(name="neighbour").check()
    loss_specs.NeighbourSpec(name="neighbour", similarity="cosine", tau=0.05).check()


@pytest.mark.parametrize("path", sorted((CONF_DIR / "loss").glob("*.yaml")), ids=lambda p: p.stem)
def test_a_loss_yaml_sets_only_what_differs_from_its_specs_defaults(path) -> None:
    node = yaml.safe_load(path.read_text())
    spec = next(s for s in LOSS_SPECS if s.target == node["_target_"])
    assert node["defaults"] == [f"/schema/loss/{spec.__name__}@_here_", "_self_"]
    assert node["name"] == path.stem
    defaults = {f.name: f.default for f in dataclasses.fields(spec) if f.name != "name"}
    for key, value in node.items():
        if key in ("defaults", "name", "_target_"):
            continue
        default = defaults[key].value if isinstance(defaults[key], enum.Enum) else defaults[key]
        assert value != default, f"{path.name}: {key}: {value} repeats its spec's default"
