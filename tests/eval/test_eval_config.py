"""The eval config group: the ``eval`` node is ``tasks`` + :class:`EvalOptions`' fields + ``pooler`` (each option
declared once, in EvalOptions), evaluate() takes one EvalOptions, ``check()`` rejects a bad value with its one line,
and every conf/eval/*.yaml composes and passes check_eval_config against the real data layout."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from cl_bench.config import EvalConfig, register_schemas
from cl_bench.eval import EvalConfigError, EvalOptions, check_eval_config, evaluate
from cl_bench.eval.flow_options import FlowOptions
from cl_bench.eval.options import ENCODER_EVAL_KEYS, NODE_ONLY_KEYS

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def _composed(*overrides: str):  # noqa: ANN202 (a DictConfig)
    register_schemas()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose(config_name="config", overrides=list(overrides))


def test_eval_options_are_the_eval_node_keys_but_tasks_and_the_encoders() -> None:
    options = [field.name for field in dataclasses.fields(EvalOptions)]
    assert NODE_ONLY_KEYS == ("tasks", *ENCODER_EVAL_KEYS)
    schema = [field.name for field in dataclasses.fields(EvalConfig)]
    assert schema == ["tasks", *options, *ENCODER_EVAL_KEYS]  # the schema is built from EvalOptions, in its order
    composed = _composed().eval
    assert [key for key in composed if key not in NODE_ONLY_KEYS] == options
    defaults, node_defaults = EvalOptions(), EvalConfig()
    for name in options:
        assert getattr(node_defaults, name) == getattr(defaults, name), name
    assert EvalOptions.from_config(composed) == defaults  # conf/eval/default.yaml sets the schema's defaults


def test_evaluate_takes_one_eval_options() -> None:
    assert list(inspect.signature(evaluate).parameters) == ["encoder", "data_dir", "tasks", "options", "out_dir"]
    assert list(inspect.signature(check_eval_config).parameters) == [
        "data_dir", "tasks", "options", "select_metric", "eval_device", "files", "device_checks"]


def test_from_config_types_the_flow_and_names_an_unknown_key() -> None:
    options = EvalOptions.from_config({"postprocess": "flow", "flow": {"levels": 2}, "tasks": ["sts"], "pooler": None})
    assert options.flow == FlowOptions(levels=2) and options.postprocess == "flow"
    assert EvalOptions(flow={"levels": 2}) == EvalOptions(flow=FlowOptions(levels=2))
    with pytest.raises(EvalConfigError, match=r"^eval\.tsks: unknown key; valid: tasks, batch_size, .*, pooler$"):
        EvalOptions.from_config({"tsks": ["sts"]})
    with pytest.raises(EvalConfigError, match=r"^eval\.flow\.levls: unknown key; valid: "):
        EvalOptions.from_config({"flow": {"levls": 2}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.batch_size = 3  # type: ignore[misc]


@pytest.mark.parametrize(("values", "line"), [
    ({"batch_size": 0}, "eval.batch_size: must be >= 1, got 0"),
    ({"transfer_config": "slow"}, "eval.transfer_config: must be one of full, fast, got 'slow'"),
    ({"transfer_classifier": "torch"}, "eval.transfer_classifier: must be one of senteval, sklearn, got 'torch'"),
    ({"seed": -1}, "eval.seed: must be >= 0, got -1"),
    ({"postprocess": "whitening", "whitening": 0},
     "eval.whitening: must be >= 1, got 0"),
    ({"truncate_dim": True}, "eval.truncate_dim: must be >= 1, got True"),
    ({"sample_pairs": 5}, "eval.sample_pairs: must be >= 10, got 5"),
    ({"postprocess": "pca"}, "eval.postprocess: unknown 'pca'; valid: none, whitening, flow"),
    ({"whitening": 8}, "eval.whitening: the kept dimensions act only with eval.postprocess=whitening (got none)"),
    ({"postprocess": "flow", "flow": {"levels": 0}}, "eval.flow.levels: must be >= 1, got 0"),
    ({"flow": {"levels": 2}}, "eval.flow.levels: acts only with eval.postprocess=flow (got none)"),
    ({"align_uniform_split": "val"}, "eval.align_uniform_split: must be one of all, train, dev, test, got 'val'"),
])
def test_check_rejects_a_bad_value_with_its_line(values: dict, line: str) -> None:
    options = EvalOptions.from_config(values)
    with pytest.raises(EvalConfigError) as raised:
        options.check()
    assert str(raised.value) == line
    with pytest.raises(EvalConfigError) as through_the_check:  # the same line from the pre-flight check
        check_eval_config("/nonexistent", ["stsb"], options, files=False)
    assert str(through_the_check.value) == line


@pytest.mark.parametrize("option", sorted(p.stem for p in (CONF_DIR / "eval").glob("*.yaml")))
def test_eval_yamls_compose_and_validate(option: str, data_dir: Path) -> None:
    cfg = _composed(f"eval={option}")
    options = EvalOptions.from_config(cfg.eval)
    options.check()
    assert check_eval_config(data_dir, list(cfg.eval.tasks), options, select_metric="stsb_dev")
