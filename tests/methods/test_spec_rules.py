"""Every method and augmentation key with a numeric range declares its rule on its spec's field, and a value that
breaks it is rejected by ``spec.check()`` in one line naming the key (the generic checker's words)."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from annotated_types import Ge, Gt, Interval, Le, Lt, MinLen
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import validate, yaml_spec
from cl_bench.specs import AugmentationSpec, Because, MethodSpec, Must, Spec, field_rules, registered

#: numeric keys with no rule of their own, and why
NO_RULE = {("BackTranslationSpec", "limit"): "it interpolates data.limit, whose rule is the data group's"}
#: a value that breaks each Must rule (the standard constraints' bad values are derived from their bounds)
MUST_BREAKERS = {"encoders": 3, "kernel_sizes": [2], "template": "no slot", "second_template": "[X] [X] [MASK]"}


def option_specs() -> list[type[Spec]]:
    """The registered method and augmentation specs (cl-bench's own)."""
    return [cls for cls in registered().values() if issubclass(cls, MethodSpec | AugmentationSpec)]


def instance(cls: type[Spec]) -> Spec:
    """The spec with its declared defaults (a method's ``name`` has none: the YAML's label)."""
    spec = cls(name="x") if issubclass(cls, MethodSpec) else cls()
    if hasattr(spec, "generator"):
        spec = dataclasses.replace(spec, generator=None)  # DiffCSE's hub generator is not reachable offline
    return spec


def is_numeric(hint: object) -> bool:
    """Whether a field's type is a number or a list of numbers, alone or optional (bool is not one)."""
    if hint in (int, float):
        return True
    if typing.get_origin(hint) is typing.Annotated:
        return is_numeric(typing.get_args(hint)[0])
    return any(is_numeric(arm) for arm in typing.get_args(hint))


def breaker(rule: object, key: str, each: bool) -> object:
    """A value the rule rejects."""
    if isinstance(rule, Must):
        return MUST_BREAKERS[key]
    if isinstance(rule, MinLen):
        return []
    if isinstance(rule, Interval):
        bounds = [b for b in (rule.gt, rule.ge) if b is not None]
        value = bounds[0] - 1 if bounds else (rule.lt if rule.lt is not None else rule.le + 1)
    elif isinstance(rule, Gt | Lt):
        value = rule.gt if isinstance(rule, Gt) else rule.lt
    elif isinstance(rule, Ge):
        value = rule.ge - 1
    elif isinstance(rule, Le):
        value = rule.le + 1
    else:
        raise AssertionError(f"{key}: no bad value for {rule!r}")
    return [value] if each else value


def cases() -> list[tuple[type[Spec], str, object]]:
    """(spec, key, a bad value) for every declared rule of every option spec."""
    out = []
    for cls in option_specs():
        for key, rules in field_rules(cls).items():
            name, each = key.removesuffix("[]"), key.endswith("[]")
            out += [(cls, name, breaker(rule, name, each)) for rule in rules if not isinstance(rule, Because)]
    return out


def test_every_numeric_key_declares_its_rule() -> None:
    specs = option_specs()
    assert len([c for c in specs if issubclass(c, MethodSpec)]) == 16 and len(specs) > 30
    missing = []
    for cls in specs:
        hints = typing.get_type_hints(cls, include_extras=True)
        rules = field_rules(cls)
        for f in dataclasses.fields(cls):
            declared = [r for r in (*rules[f.name], *rules.get(f"{f.name}[]", ())) if not isinstance(r, Because)]
            if is_numeric(hints[f.name]) and not declared and (cls.__name__, f.name) not in NO_RULE:
                missing.append(f"{cls.__name__}.{f.name}")
    assert not missing, f"numeric keys without a declared rule: {missing}"


@pytest.mark.parametrize("cls", option_specs(), ids=lambda c: c.__name__)
def test_every_key_has_a_default_and_the_defaults_pass(cls: type[Spec]) -> None:
    no_default = [f.name for f in dataclasses.fields(cls) if f.name != "name"
                  and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    assert not no_default, f"{cls.__name__}: keys without a default: {no_default}"
    instance(cls).check()


@pytest.mark.parametrize(("cls", "key", "bad"), cases(), ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_bad_value_is_one_line_naming_the_key(cls: type[Spec], key: str, bad: object) -> None:
    spec = dataclasses.replace(instance(cls), **{key: bad})
    with pytest.raises(ValueError) as err:
        spec.check()
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{cls.group}.{key}: must ") and message.endswith(f", got {bad!r}")


@pytest.mark.parametrize(("group", "option", "changes", "message"), [
    ("method", "simcse", {"mlm_probability": 1.5}, "method.mlm_probability: must be in (0, 1), got 1.5"),
    ("method", "swav", {"projection": [16, 0]}, "method.projection: must be a list of values >= 1, got [16, 0]"),
    ("method", "sg_opt", {"projection_size": -1}, "method.projection_size: must be >= 0 (0 = no head), got -1"),
    ("method", "sncse", {"template": "[X] means it"},
     "method.template: must hold one sentence slot [X] and one [MASK], got '[X] means it'"),
    ("augmentation", "crop", {"rate": 1.0}, "augmentation.rate: must be in [0, 1), got 1.0"),
    ("augmentation", "mlm_replace", {"top_k": 0}, "augmentation.top_k: must be >= 1, got 0"),
    # a rule of two keys stays the spec's check_combination
    ("method", "declutr", {"min_span_len": 30, "max_span_len": 20},
     "method.min_span_len: must be in [1, max_span_len=20], got 30"),
    ("augmentation", "synonym", {"aug_min": 3, "aug_max": 2},
     "augmentation.aug_min: must be <= augmentation.aug_max (2), got 3"),
])
def test_messages_from_the_options_yaml(group: str, option: str, changes: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        yaml_spec(group, option, **changes)
    assert str(err.value) == message


def test_a_run_reports_the_rule_before_any_model_loads(tiny_bert, data_dir, monkeypatch) -> None:
    monkeypatch.setenv("CL_BENCH_DATA", str(data_dir))
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["method=simcse", "method.mlm_probability=1.5",
                                           f"model.name_or_path={tiny_bert}"])
    with pytest.raises(ValueError, match=r"^method\.mlm_probability: must be in \(0, 1\), got 1\.5$"):
        validate(cfg)
