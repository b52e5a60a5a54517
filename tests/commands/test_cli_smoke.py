"""End to end: the real `cl-bench` console command, a tiny model, real STS data, a real MLflow store."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
from conftest import cl_bench_process

STS_KEYS = ("sts/sts12", "sts/sts13", "sts/sts14", "sts/sts15", "sts/sts16", "sts/stsb", "sts/sickr", "sts/sts_avg",
            "geometry/align", "geometry/uniform")


def _tiny_run_args(tiny_bert: Path) -> list[str]:
    return [
        f"model.name_or_path={tiny_bert}",
        "data=wiki1m_head",
        "data.limit=48",
        "batch_size=8",
        "train.max_steps=4",
        "train.eval_steps=2",
        "train.log_steps=1",
        "train.progress_bar=false",
    ]


def test_train_run_logs_params_metrics_artifacts(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    with_bar = [arg for arg in _tiny_run_args(tiny_bert) if not arg.startswith("train.progress_bar=")]
    proc = cl_bench_process([*with_bar, "loss.tau=0.05", "hydra.run.dir=run"], tmp_path, data_dir)
    assert "STS12" in proc.stdout  # the SimCSE-style table row
    # output to a pipe: the progress as whole lines (no \r frames), no MLflow store-creation chatter
    output = proc.stdout + proc.stderr
    assert "\r" not in output and "train: 4/4 steps (100%)" in output
    assert "Creating initial MLflow database tables" not in output and "Updating database tables" not in output
    assert "train: 4/4 steps (100%)" in (tmp_path / "run" / "cli.log").read_text()  # the job's log file too
    run_dir = tmp_path / "run"
    results = json.loads((run_dir / "results.json").read_text())
    for key in STS_KEYS:
        assert key in results and results[key] == results[key], key  # present and not NaN
    assert -100 <= results["sts/sts_avg"] <= 100
    assert (run_dir / "best_model" / "config.json").is_file()
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) >= 6
    # one name per quantity: the in-training dev series and the final evaluation's dev figure are two names, each
    # logged by one evaluation (the dev series at every train.eval_steps, the final figure once)
    assert [line["step"] for line in lines if "select/stsb_dev" in line] == [2, 4]
    assert len([line for line in lines if "sts/stsb_dev" in line]) == 1
    assert not [name for line in lines for name in line if name not in ("step", "time") and "/" not in name]

    # MLflow's default store in the launch directory: what `mlflow ui` run there shows
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("cl-bench")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert params["loss.tau"] == "0.05" and params["model.name_or_path"] == str(tiny_bert)
    # named as on the command line: the group choices, their scalar keys; no import path, no recording key
    assert params["batch_size"] == "8" and params["method"] == "simcse" and params["loss"] == "infonce"
    assert not [k for k in params if "_target_" in k or k.startswith(("logger.", "paths."))] and "method.name" not in params
    # each value once (no copies of the shortcuts), only what acted (no MLM probability without MLM)
    assert "train.batch_size" not in params and "model.dropout" not in params and params["dropout"] == "0.1"
    assert "method.mlm_probability" not in params and "loss._partial_" not in params
    for key in STS_KEYS:
        assert run.data.metrics[key] == pytest.approx(results[key])
    history = client.get_metric_history(run.info.run_id, "select/stsb_dev")
    assert [m.step for m in history] == [2, 4]  # every train.eval_steps, and nothing else under that name
    assert len(client.get_metric_history(run.info.run_id, "sts/stsb_dev")) == 1  # the final evaluation's
    assert len(client.get_metric_history(run.info.run_id, "train/loss")) == 4
    assert len(client.get_metric_history(run.info.run_id, "train/lr")) == 4
    assert run.data.tags["mlflow.note.content"].startswith("sts/sts_avg ")  # the headline, under the recorded names
    tags = run.data.tags
    assert tags["method"] == "simcse" and tags["encoder"] == str(tiny_bert) and "sweep" not in tags
    assert "None" not in tags.values() and tags["loss"] == "infonce" and tags["augmentation"] == "dropout"
    assert tags["cl_bench.git_commit"] and tags["torch.version"] and tags["transformers.version"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"results.json", "config.yaml"} <= artifacts
    # MLflow's own records (cl_bench/commands/mlflow_records.py): the data sets, the best checkpoint as a model,
    # and the printed runs-table URL opening a saved view of the experiment
    contexts = {i.dataset.name: [t.value for t in i.tags] for i in client.get_run(run.info.run_id).inputs.dataset_inputs}
    assert contexts["corpus/wiki1m_for_simcse.head.txt"] == ["training"] and ["evaluation"] in contexts.values()
    [model] = client.search_logged_models(experiment_ids=[experiment.experiment_id])
    assert model.source_run_id == run.info.run_id
    view_key = proc.stdout.split("MLflow runs table: ", 1)[1].split("viewStateShareKey=", 1)[1].split()[0]
    assert f"mlflow.sharedViewState.{view_key}" in client.get_experiment(experiment.experiment_id).tags


@pytest.mark.slow  # ~45 s on 2 quiet cores: the full STS suite in a subprocess; mode=eval is also in test_decoder_eval
def test_eval_mode_scores_a_model_without_training(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    cl_bench_process(
        ["mode=eval", f"model.name_or_path={tiny_bert}", "pooler=avg", "hydra.run.dir=ev", "logger.enabled=false"],
        tmp_path, data_dir,
    )
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert set(STS_KEYS) <= set(results)
    assert not (tmp_path / "mlflow.db").exists()  # logger disabled: nothing sent


@pytest.mark.slow  # ~80 s on 2 quiet cores: two training jobs through the joblib launcher
def test_parallel_sweep_is_one_parent_with_child_runs(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    # A fresh SQLite store and two parallel joblib workers: the store is created once, before the jobs.
    cl_bench_process(
        ["-m", *_tiny_run_args(tiny_bert), "dropout=0,0.1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
         "hydra.sweep.dir=sweep"],
        tmp_path, data_dir,
    )
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("cl-bench")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    assert len(parents) == 1
    parent = parents[0]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.params["dropout"] for r in children) == ["0.0", "0.1"]
    assert all(r.info.status == "FINISHED" for r in children)
    assert parent.info.status == "FINISHED" and parent.data.tags["sweep.failed_children"] == "none"
    assert all(r.data.tags["sweep"].endswith("sweep") for r in children)
    for job in ("0", "1"):
        assert (tmp_path / "sweep" / job / "results.json").is_file()
