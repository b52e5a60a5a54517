"""The trainer's inputs: :class:`cl_bench.run_specs.RunSpecs`, built once from the composed config
(:func:`cl_bench.config.typed_specs`), and train/ reading nothing else of the config."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from cl_bench.config import register_schemas, typed_specs
from cl_bench.config.catalog import CONF_DIR
from cl_bench.eval.options import EvalConfig
from cl_bench.run_specs import DataConfig, ModelConfig, RunSpecs, TrainConfig

TRAIN_DIR = Path(__file__).resolve().parents[2] / "cl_bench" / "train"


def _specs(*overrides: str) -> RunSpecs:
    register_schemas()  # conf/config.yaml extends the schema (as importing the CLI does)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return typed_specs(compose("config", overrides=list(overrides)))


def test_the_specs_are_typed_objects_with_the_composed_values() -> None:
    specs = _specs("train.matryoshka_dims=[8,16]", "batch_size=16", "loss.tau=0.1", "data.limit=40", "seed=7")
    assert isinstance(specs.train, TrainConfig) and isinstance(specs.model, ModelConfig)
    assert isinstance(specs.data, DataConfig) and isinstance(specs.eval, EvalConfig)
    assert specs.train.matryoshka_dims == [8, 16] and type(specs.train.matryoshka_dims) is list  # no ListConfig
    assert specs.train.batch_size == 16 and specs.model.dropout == 0.1  # the top-level shortcuts, resolved
    assert (specs.seed, specs.data.limit, specs.mode) == (7, 40, "train")
    assert specs.method is not None and specs.method.name == "simcse"
    assert specs.loss is not None and specs.loss.tau == 0.1 and specs.augmentation is not None
    assert specs.paths.output_dir == ""  # composed from Python: no Hydra job, no run folder
    with pytest.raises(dataclasses.FrozenInstanceError):
        specs.seed = 1  # type: ignore[misc]


def test_a_group_the_run_does_not_use_is_none() -> None:
    assert _specs("method=is_bert").augmentation is None  # IS-BERT uses no augmentation
    evaluation = _specs("mode=eval")
    assert (evaluation.method, evaluation.loss, evaluation.augmentation) == (None, None, None)


def test_train_imports_no_config_library_and_no_preflight() -> None:
    """train/ receives typed specs: none of its modules imports omegaconf, hydra or cl_bench.config."""
    for path in sorted(TRAIN_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] not in ("omegaconf", "hydra") and not name.startswith("cl_bench.config"), (
                    f"{path.name} imports {name}")


def test_the_inert_keys_are_gathered_once_and_are_what_the_records_leave_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job records its params with the inert keys its preflight found (RunSpecs.inert, gathered once): the
    same params as from the composed config alone, without building the specs again."""
    import cl_bench.config as config

    register_schemas()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["method=is_bert", "paths.output_dir=run"])  # no Hydra job: a folder named
    specs = typed_specs(cfg)
    inert = specs.inert
    assert specs.inert is inert and "augmentation" in inert  # IS-BERT uses no augmentation
    from cl_bench.config.params import acting_params

    expected = acting_params(cfg, config.inert_keys(cfg))
    assert expected and not any(key.startswith("augmentation.") for key in expected)

    def built_again(*args: object) -> None:
        raise AssertionError("the specs were built again")

    monkeypatch.setattr(config, "typed_specs", built_again)
    assert acting_params(cfg, specs.inert) == expected
    assert dict(config.inert_keys(specs)) == dict(inert)


def test_a_resume_is_compared_with_the_preflights_inert_keys(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The resume comparison (check_run_folder) takes the preflight's inert keys and builds no specs: the job and
    cl-bench's early checks pass them (None: no preflight result, nothing compared; the run is refused for that)."""
    import json

    import cl_bench.config as config
    from cl_bench.config.run_folder import check_run_folder, current_params
    from cl_bench.utils.rundir import RunDir

    register_schemas()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["method=simcse", f"train.resume={tmp_path}"])
    specs = typed_specs(cfg)
    recorded = current_params(cfg, tmp_path, specs.inert)
    recorded["loss.tau"] = 0.5  # the run was started with another temperature
    RunDir(tmp_path).params.write_text(json.dumps(recorded))

    def built_again(*args: object) -> None:
        raise AssertionError("the specs were built again")

    monkeypatch.setattr(config, "typed_specs", built_again)
    with pytest.raises(config.ConfigError, match=r"^train.resume: .* \(loss.tau: was 0.5, now 0.05\)"):
        check_run_folder(cfg, tmp_path, specs.inert)
    check_run_folder(cfg, tmp_path, None)  # nothing to compare with
