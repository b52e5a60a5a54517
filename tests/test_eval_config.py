"""The eval config group: every EvalConfig field is a keyword of evaluate(), every conf/eval/*.yaml
composes and passes check_eval_config against the real data layout."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from cl_bench.config import ENCODER_EVAL_KEYS, EvalConfig, register_schemas
from cl_bench.eval import check_eval_config, evaluate

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def test_every_eval_config_field_is_an_evaluate_keyword() -> None:
    parameters = inspect.signature(evaluate).parameters
    defaults = EvalConfig()
    for field in dataclasses.fields(EvalConfig):
        if field.name in ENCODER_EVAL_KEYS:  # acts on the encoder evaluate() is given, not on evaluate()
            assert field.name not in parameters, field.name
            continue
        assert field.name in parameters, field.name
        if field.name != "tasks":  # a list in the schema, a tuple default in the function
            assert parameters[field.name].default == getattr(defaults, field.name), field.name


@pytest.mark.parametrize("option", sorted(p.stem for p in (CONF_DIR / "eval").glob("*.yaml")))
def test_eval_yamls_compose_and_validate(option: str, data_dir: Path) -> None:
    register_schemas()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=[f"eval={option}"])
    options = {k: v for k, v in cfg.eval.items() if k not in ENCODER_EVAL_KEYS}
    tasks = check_eval_config(data_dir, select_metric="stsb_dev", **options)
    assert tasks and set(options) | set(ENCODER_EVAL_KEYS) == {field.name for field in dataclasses.fields(EvalConfig)}
