"""What a run records in a real (sqlite) MLflow store beyond its figures: the experiment's kind, params named as on
the command line, its data sets with provenance's digests, its best checkpoint as a model that reproduces cl-bench's
embeddings, system metrics only when asked, and the saved views the printed URLs open."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import mlflow
import numpy as np
import pytest
from conftest import params_of
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from cl_bench.commands.cli import register_schemas  # noqa: F401 (importing the CLI registers the schema)
from cl_bench.config import typed_specs
from cl_bench.config.catalog import CONF_DIR
from cl_bench.tracking import ui_views
from cl_bench.tracking.mlflow_logger import (
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    RunTracker,
    ensure_experiment,
)
from cl_bench.tracking.mlflow_objects import DIGEST_CHARS, group_digest
from cl_bench.tracking.params import knob_params
from cl_bench.utils.rundir import ENCODER_META_FILE


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def _composed(overrides: list[str], data_dir: Path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"paths.data_dir={data_dir}", *overrides], return_hydra_config=True)
    choices = dict(cfg.hydra.runtime.choices)
    with open_dict(cfg):
        del cfg["hydra"]
        cfg.paths.output_dir = "run"
    return cfg, choices


def test_experiment_is_tagged_as_model_training(tmp_path: Path) -> None:
    uri = _store(tmp_path)
    client = mlflow.MlflowClient(uri)
    created = ensure_experiment(uri, "cl-bench")
    assert client.get_experiment(created).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"
    untagged = client.create_experiment("made-elsewhere")  # cl-bench adding runs to an experiment it did not make
    assert EXPERIMENT_KIND_TAG not in client.get_experiment(untagged).tags
    assert ensure_experiment(uri, "made-elsewhere") == untagged
    assert client.get_experiment(untagged).tags[EXPERIMENT_KIND_TAG] == "custom_model_development"


def test_params_are_the_knobs_named_as_on_the_command_line(data_dir: Path) -> None:
    cfg, choices = _composed(["method=simcse", "loss.tau=0.07", "train.lr=1e-5"], data_dir)
    params = knob_params(params_of(cfg), choices)
    assert params["method"] == "simcse" and params["loss"] == "infonce" and params["pooler"] == "cls"
    assert params["model"] == choices["model"] and params["augmentation"] == "dropout"
    assert params["loss.tau"] == 0.07 and params["train.lr"] == 1e-5 and params["dropout"] == 0.1
    assert not [k for k in params if any(part.startswith("_") for part in k.split("."))]  # no _target_, _partial_
    assert not [k for k in params if k.startswith(("logger.", "paths."))]
    assert "method.name" not in params and "loss.name" not in params
    # a group the method does not use gets no param (SimCSE-sup reads NLI triplets: no augmentation)
    sup, sup_choices = _composed(["method=simcse_sup"], data_dir)
    assert "augmentation" not in knob_params(params_of(sup), sup_choices)


def test_datasets_logged_with_provenance_digests(tmp_path: Path, data_dir: Path) -> None:
    from cl_bench.commands.mlflow_records import log_data, train_file_name
    from cl_bench.commands.provenance import FileHashes, data_hashes

    cfg, _ = _composed(["data=wiki1m_head", "eval=quick"], data_dir)
    hashes = data_hashes(typed_specs(cfg), FileHashes(tmp_path / "hashes.json"))
    tracker = RunTracker(tmp_path / "run", tracking_uri=_store(tmp_path))
    tracker.start({"seed": 1}, {})
    log_data(tracker, cfg, {"data_sha256": hashes})
    inputs = mlflow.MlflowClient(tracker.tracking_uri).get_run(tracker.run_id).inputs.dataset_inputs
    by_name = {i.dataset.name: i for i in inputs}
    corpus = train_file_name(cfg)
    assert corpus == "corpus/wiki1m_for_simcse.head.txt" and corpus in hashes
    assert by_name[corpus].dataset.digest == hashes[corpus][:DIGEST_CHARS]
    assert json.loads(by_name[corpus].dataset.profile)["sha256"] == hashes[corpus]
    assert [t.value for t in by_name[corpus].tags if t.key == "mlflow.data.context"] == ["training"]
    assert json.loads(by_name[corpus].dataset.source)["uri"] == str(data_dir.absolute() / corpus)
    stsb_files = {k: v for k, v in hashes.items() if k.startswith("sts/STSBenchmark/")}
    assert len(stsb_files) >= 2  # dev and test: one data set of several files
    stsb = by_name["sts/STSBenchmark"]
    assert json.loads(stsb.dataset.profile) == {"sha256": group_digest(stsb_files), "files": len(stsb_files)}
    assert [t.value for t in stsb.tags if t.key == "mlflow.data.context"] == ["evaluation"]
    assert sum(json.loads(i.dataset.profile)["files"] for i in inputs) == len(hashes)  # every file in one data set


def _sentences(data_dir: Path, n: int = 100) -> list[str]:
    lines = (data_dir / "corpus" / "wiki1m_for_simcse.head.txt").read_text().splitlines()
    return [line for line in lines if line.strip()][:n]


def test_logged_model_loads_through_mlflow_and_reproduces_the_embeddings(tiny_bert: Path, data_dir: Path,
                                                                         tmp_path: Path) -> None:
    import shutil

    from cl_bench.commands.mlflow_records import log_best_model
    from cl_bench.models.encoder import build_encoder

    model_dir = tmp_path / "best_model"
    shutil.copytree(tiny_bert, model_dir)
    (model_dir / ENCODER_META_FILE).write_text(json.dumps({"pooler": "avg"}))
    tracker = RunTracker(tmp_path / "run", tracking_uri=_store(tmp_path))
    tracker.start({"pooler": "avg"}, {})
    tracker.log_metrics({"sts/stsb": 51.5}, step=7)
    uri = log_best_model(model_dir, 7, tracker.log_model)
    assert uri is not None and uri.startswith("models:/m-")
    client = mlflow.MlflowClient(tracker.tracking_uri)
    experiment_id = client.get_run(tracker.run_id).info.experiment_id
    [logged] = client.search_logged_models(experiment_ids=[experiment_id])  # in the run's experiment, not Default
    assert logged.source_run_id == tracker.run_id and {m.key: m.value for m in logged.metrics} == {"sts/stsb": 51.5}
    mlflow.set_tracking_uri(tracker.tracking_uri)
    try:
        loaded = mlflow.sentence_transformers.load_model(uri)
    finally:
        mlflow.set_tracking_uri(None)
    sentences = _sentences(data_dir)
    ours = build_encoder(str(model_dir), pooler="avg", fresh_mlp=False).encode(sentences, batch_size=32)
    theirs = loaded.encode(sentences, convert_to_numpy=True)
    assert len(sentences) == 100 and theirs.shape == ours.shape
    np.testing.assert_allclose(theirs, ours, atol=1e-5)


def test_a_prompted_checkpoint_is_logged_as_a_pyfunc_that_reproduces_the_embeddings(tiny_bert: Path, data_dir: Path,
                                                                                  tmp_path: Path) -> None:
    from functools import partial

    from cl_bench.commands.mlflow_pyfunc import log_pyfunc_encoder
    from cl_bench.commands.mlflow_records import log_best_model
    from cl_bench.models.encoder import build_encoder

    template = 'This sentence of "[X]" means [MASK].'
    model_dir = tmp_path / "best_model"
    build_encoder(str(tiny_bert), pooler="mask", dropout=0.0, prompt=template).save(model_dir)
    tracker = RunTracker(tmp_path / "run", tracking_uri=_store(tmp_path))
    tracker.start({"pooler": "mask"}, {})
    uri = log_best_model(model_dir, 2, tracker.log_model, partial(tracker.log_model, log_fn=log_pyfunc_encoder))
    assert uri is not None and uri.startswith("models:/m-")  # sentence-transformers has no [MASK] pooling: pyfunc
    mlflow.set_tracking_uri(tracker.tracking_uri)
    try:
        loaded = mlflow.pyfunc.load_model(uri)
    finally:
        mlflow.set_tracking_uri(None)
    sentences = _sentences(data_dir)
    ours = build_encoder(str(model_dir), pooler="mask", prompt=template, fresh_mlp=False).encode(sentences, batch_size=32)
    np.testing.assert_allclose(np.asarray(loaded.predict(sentences)), ours, atol=1e-5)


def test_log_model_on_a_dead_store_warns_and_goes_on(tiny_bert: Path, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from cl_bench.commands.mlflow_records import log_best_model

    (tmp_path / "model").mkdir()
    model_dir = Path(__import__("shutil").copytree(tiny_bert, tmp_path / "model" / "best_model"))
    (model_dir / ENCODER_META_FILE).write_text(json.dumps({"pooler": "avg"}))
    tracker = RunTracker(tmp_path / "run", tracking_uri=_store(tmp_path))
    tracker.start({}, {})
    tracker.tracking_uri = f"sqlite:///{tmp_path / 'gone' / 'nowhere' / 'mlflow.db'}"  # the store went away
    with caplog.at_level(logging.WARNING):
        assert log_best_model(model_dir, 1, tracker.log_model) is None
    assert "MLflow log_model failed" in caplog.text and not tracker.mlflow_ok
    tracker.log_metrics({"sts/stsb": 1.0}, step=1)  # the run goes on with its local files
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("\n") == 1


def test_system_metrics_off_starts_nothing_on_logs_system_metrics(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    off = RunTracker(tmp_path / "off", tracking_uri=_store(tmp_path), system_metrics=False)
    off.start({}, {})
    assert off._system_monitor is None and "SystemMetricsMonitor" not in {t.name for t in threading.enumerate()}
    off.finish()
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")
    on = RunTracker(tmp_path / "on", tracking_uri=_store(tmp_path), system_metrics=True)
    on.start({}, {})
    assert "SystemMetricsMonitor" in {t.name for t in threading.enumerate()}
    time.sleep(1.0)  # a few samples (no timing is asserted: the monitor's flush at finish sends what it has)
    on.finish()
    client = mlflow.MlflowClient(on.tracking_uri)
    metrics = client.get_run(on.run_id).data.metrics
    assert "system/cpu_utilization_percentage" in metrics and "system/system_memory_usage_megabytes" in metrics
    assert not [k for k in client.get_run(off.run_id).data.metrics if k.startswith("system/")]
    assert "SystemMetricsMonitor" not in {t.name for t in threading.enumerate()}


def test_system_metrics_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from cl_bench.commands.mlflow_records import system_metrics_on

    assert system_metrics_on(True) and system_metrics_on("true") and not system_metrics_on(False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert system_metrics_on("auto")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not system_metrics_on("auto")


def test_saved_view_is_what_the_ui_reads(tmp_path: Path) -> None:
    uri = _store(tmp_path)
    experiment_id = ensure_experiment(uri, "cl-bench")
    client = mlflow.MlflowClient(uri)
    # runs logged before the sections: the flat names stand in for the headline figures
    columns = ui_views.headline_columns(["stsb", "sts_avg", "best_stsb_dev", "train_loss"], first="best_stsb_dev")
    assert columns == ["best_stsb_dev", "sts_avg", "stsb"]
    assert ui_views.headline_columns(["sts/stsb", "stsb", "select/best_stsb_dev"]) == ["sts/stsb", "select/best_stsb_dev"]
    state = ui_views.runs_view_state(columns, ["dropout"], "best_stsb_dev", ui_views.children_filter("abc"))
    key = ui_views.save_view(client, experiment_id, "sweep: runs", state)
    assert ui_views.save_view(client, experiment_id, "sweep: runs", state) == key  # saved again: the same tag
    envelope = json.loads(client.get_experiment(experiment_id).tags[f"mlflow.sharedViewState.{key}"])
    assert envelope["name"] == "sweep: runs" and isinstance(envelope["createdAt"], int)
    saved = json.loads(envelope["state"])
    assert saved["selectedColumns"][:2] == ["params.`dropout`", "metrics.`best_stsb_dev`"]
    assert saved["orderByKey"] == "metrics.`best_stsb_dev`" and saved["orderByAsc"] is False
    assert saved["searchFilter"] == "tags.`mlflow.parentRunId` = 'abc'"
    charts = ui_views.charts_view_state(columns, ["dropout", "loss.tau"], "best_stsb_dev")
    parallel = charts["compareRunCharts"][0]
    assert parallel["type"] == "PARALLEL" and parallel["selectedParams"] == ["dropout", "loss.tau"]
    assert parallel["selectedMetrics"] == columns and ui_views.view_query(key, charts=True).endswith("compareRunsMode=CHART")


def test_bad_logger_values_are_named(data_dir: Path) -> None:
    from cl_bench.config import ConfigError, check_choices

    cfg, _ = _composed(["logger.system_metrics=sometimes"], data_dir)
    with pytest.raises(ConfigError, match=r"^logger\.system_metrics: must be one of auto, true, false, got 'sometimes'"):
        check_choices(cfg, before_torch=True)
    check_choices(_composed(["logger.system_metrics=false"], data_dir)[0], before_torch=True)  # a boolean from the command line is fine
    with pytest.raises(Exception, match=r"logger\.log_model=last") as err:
        _composed(["logger.log_model=last"], data_dir)
    assert "Invalid value 'last', expected one of [all, best, none]" in str(err.value.__cause__)


def test_sync_logs_the_datasets_a_run_could_not_send(tmp_path: Path, data_dir: Path) -> None:
    """A run whose MLflow was off or down keeps its data sets in ``datasets.json``; ``cl-bench-sync`` logs them as the
    MLflow run's dataset inputs (once: a second sync adds none)."""
    from cl_bench.commands.mlflow_records import log_data
    from cl_bench.commands.provenance import FileHashes, data_hashes
    from cl_bench.tracking.sync import sync_run

    cfg, _ = _composed(["data=wiki1m_head", "eval=quick"], data_dir)
    hashes = data_hashes(typed_specs(cfg), FileHashes(tmp_path / "hashes.json"))
    tracker = RunTracker(tmp_path / "run", enabled=False)
    tracker.start({"seed": 1}, {})
    log_data(tracker, cfg, {"data_sha256": hashes})
    tracker.log_results({"sts/stsb": 50.0})
    tracker.finish("FINISHED")
    records = json.loads((tmp_path / "run" / "datasets.json").read_text())
    assert {r["name"] for r in records} >= {"corpus/wiki1m_for_simcse.head.txt", "sts/STSBenchmark"}
    run_id = sync_run(tmp_path / "run", tracking_uri=_store(tmp_path))
    sync_run(tmp_path / "run", tracking_uri=_store(tmp_path))
    inputs = mlflow.MlflowClient(_store(tmp_path)).get_run(run_id).inputs.dataset_inputs
    assert sorted((i.dataset.name, i.dataset.digest) for i in inputs) == sorted((r["name"], r["digest"]) for r in records)
