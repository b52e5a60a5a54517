"""A sweep ends with its answer, and a key that could not act in some jobs is never taken for an axis."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from conftest import cli_env

from cl_bench.reporting.report import (
    build_sweep_table,
    load_run_dirs,
    main,
    reference_point,
    sweep_summary,
    swept_keys,
)


def _job(sweep: Path, number: int, params: dict, results: dict, status: str = "FINISHED",
         overrides: list[str] | None = None) -> None:
    """A job folder as cl-bench writes it; ``overrides``: the job's Hydra overrides (None: a run logged before
    cl-bench recorded them, only ``override_dirname``)."""
    job = sweep / str(number)
    job.mkdir(parents=True)
    (job / "params.json").write_text(json.dumps(params))
    tags = {"overrides": ",".join(f"{k}={v}" for k, v in params.items() if k in ("dropout", "loss.tau", "seed"))}
    if overrides is not None:
        tags["overrides.task"] = json.dumps(overrides)
    (job / "tags.json").write_text(json.dumps(tags))
    (job / "results.json").write_text(json.dumps({**results, "pooler": "cls"}))
    (job / "status.json").write_text(json.dumps({"status": status, "error": None}))


def _grid(sweep: Path) -> None:
    """dropout × tau, two seeds; ``method.fixed_dropout_mask`` acts (and is logged) only at dropout > 0."""
    number = 0
    for dropout in (0.0, 0.1):
        for tau in (0.05, 0.1):
            for seed in (1, 2):
                params = {"dropout": dropout, "loss.tau": tau, "seed": seed, "method.name": "simcse"}
                params["method.fixed_dropout_mask"] = False if dropout > 0 else "n/a"
                _job(sweep, number, params, {"best_stsb_dev": 70 + 10 * dropout + tau + seed / 100, "stsb": 60.0})
                number += 1


def test_summary_from_run_dirs_without_mlflow(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _grid(tmp_path / "sweep")
    runs = load_run_dirs(tmp_path / "sweep")
    assert len(runs) == 8 and set(runs["status"]) == {"FINISHED"}
    text = sweep_summary(tmp_path / "sweep")
    lines = text.splitlines()
    assert lines[0].startswith("Sweep over dropout × loss.tau: best_stsb_dev (dev, checkpoint selection (in-training "
                               "dev evaluation), full), mean ± std (seeds n)")
    assert "loss.tau \\ dropout" in text and text.count("± 0.01 (2)") == 4  # every cell: two seeds
    assert lines[-1] == f"full report (no MLflow): cl-bench-report --sweep-dir {tmp_path / 'sweep'}"
    # the full report from the run dirs alone
    assert main(["--sweep-dir", str(tmp_path / "sweep"), "--out", str(tmp_path / "report")]) == 0
    assert "loss.tau" in (tmp_path / "report" / "report.md").read_text()
    assert "method.fixed_dropout_mask" not in capsys.readouterr().out


def test_a_key_logged_by_some_runs_only_is_no_axis(tmp_path: Path) -> None:
    _grid(tmp_path / "sweep")
    runs = load_run_dirs(tmp_path / "sweep")
    # three dropout values: the inert key's n/a/False split no longer matches dropout's
    extra = runs[runs["params.dropout"] == "0.1"].assign(**{"params.dropout": "0.2", "run_id": lambda f: f["run_id"] + "b"})
    runs = pd.concat([runs, extra], ignore_index=True)
    assert swept_keys(runs) == ["dropout", "loss.tau"]
    # runs logged before the key was n/a lack it instead: no axis either
    assert swept_keys(runs.assign(**{"params.method.fixed_dropout_mask": runs["params.method.fixed_dropout_mask"].replace(
        "n/a", None)})) == ["dropout", "loss.tau"]
    # a key whose acting values differ is an axis (the fixed-mask point of Table 3)
    varied = runs.copy()
    varied.loc[(varied["params.dropout"] == "0.1") & (varied["params.loss.tau"] == "0.1"),
               "params.method.fixed_dropout_mask"] = "True"
    assert "method.fixed_dropout_mask" in swept_keys(varied)


def _mission_sweep(sweep: Path, seeds: tuple[int, ...] = (1, 2)) -> None:
    """``cl-bench -m method=simcse,sg_opt dropout=0,0.1,0.3 seed=1,2``: the methods' own temperatures differ."""
    number = 0
    for method, tau in (("simcse", 0.05), ("sg_opt", 0.01)):
        for dropout in (0.0, 0.1, 0.3):
            for seed in seeds:
                params = {"method.name": method, "method._target_": f"cl_bench.methods.{method}", "dropout": dropout,
                          "model.dropout": dropout, "loss.tau": tau, "seed": seed}
                _job(sweep, number, params, {"best_stsb_dev": 70 + dropout + seed / 100 + (method == "sg_opt")},
                     overrides=[f"method={method}", f"dropout={dropout:g}", f"seed={seed}"])
                number += 1


def test_the_mission_sweep_pivots_on_the_swept_keys_as_typed(tmp_path: Path) -> None:
    _mission_sweep(tmp_path / "sweep")
    lines = sweep_summary(tmp_path / "sweep").splitlines()
    assert lines[0].startswith("Sweep over method × dropout: best_stsb_dev")
    header = [cell.strip() for cell in lines[1].strip("|").split("|")]
    assert header == ["dropout \\ method", "simcse", "sg_opt"]
    assert [line.split("|")[1].strip() for line in lines[3:6]] == ["0", "0.1", "0.3"]
    assert all(line.count("(2) [") == 2 for line in lines[3:6])  # seeds as replicates: n = 2 and a t-interval
    notes = "\n".join(lines[6:])
    assert "Replicates: seed" in notes and "loss.tau: 0.05 (method=simcse" in notes and "0.01 (method=sg_opt" in notes
    assert "method.name" not in notes and "model.dropout" not in notes  # the swept keys themselves, not consequences
    runs = load_run_dirs(tmp_path / "sweep")
    assert reference_point(build_sweep_table(runs), runs)[0] == "method=simcse, dropout=0.1"  # a group by its default


def test_a_presets_grid_points_are_tabled_by_the_params_they_set(tmp_path: Path) -> None:
    """``+experiment/points=dropout_0.0,…`` bundles several keys per point: the params that differ are the axes."""
    for number, (point, dropout, fixed) in enumerate((("dropout_0.0", 0.0, "n/a"), ("dropout_0.1", 0.1, False),
                                                      ("dropout_fixed_0.1", 0.1, True))):
        _job(tmp_path / "sweep", number, {"dropout": dropout, "method.fixed_dropout_mask": fixed, "seed": 42},
             {"best_stsb_dev": 80.0 + number}, overrides=["experiment=ablation_dropout", f"+experiment/points={point}"])
    table = build_sweep_table(load_run_dirs(tmp_path / "sweep"))
    assert table.keys == ["dropout", "method.fixed_dropout_mask"] and "dropout=0.1, method.fixed_dropout_mask=True" in \
        list(table.points["point"])


def test_a_seeds_only_sweep_is_headed_as_replicates(tmp_path: Path) -> None:
    for number, seed in enumerate(range(1, 9)):
        _job(tmp_path / "sweep", number, {"method.name": "simcse", "dropout": 0.1, "seed": seed},
             {"best_stsb_dev": 70 + seed / 10}, overrides=["method=simcse", f"seed={seed}"])
    lines = sweep_summary(tmp_path / "sweep").splitlines()
    assert lines[0].startswith("Replicates of one setting: 8 seeds (1, 2, 3, 4, 5, 6, 7, 8): best_stsb_dev")
    row = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert row[:4] == ["8", "70.45 ± 0.24", "8", "[70.25, 70.65]"]  # runs, mean ± std, n, t-interval


def test_summary_with_parent_run_names_it(tmp_path: Path) -> None:
    _grid(tmp_path / "sweep")
    text = sweep_summary(tmp_path / "sweep", "abc123", None, "http://127.0.0.1:5000/#/experiments/1/runs/abc123")
    assert text.splitlines()[-2:] == ["MLflow parent run: abc123  http://127.0.0.1:5000/#/experiments/1/runs/abc123",
                                      "full report: cl-bench-report --parent-run abc123"]


@pytest.mark.slow  # a 3-job sweep of a tiny model (~3 min on a busy 2-core machine)
def test_sweep_ends_with_its_table_and_no_inert_axis(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [shutil.which("cl-bench"), "-m", f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=16",
         "batch_size=8", "train.max_steps=2", "train.eval_steps=2", "eval=quick", "eval.anisotropy=false",
         "train.progress_bar=false", "dropout=0,0.1,0.2", "hydra.sweep.dir=sweep"],
        cwd=tmp_path, capture_output=True, text=True, env=cli_env(data_dir), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    tail = lines[max(i for i, line in enumerate(lines) if line.startswith("Sweep over")):]  # the last lines
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = next(r for r in client.search_runs([client.get_experiment_by_name("cl-bench").experiment_id])
                  if r.data.tags.get("sweep.parent") == "true")
    parent_id = parent.info.run_id
    assert tail[0].startswith("Sweep over dropout: best_stsb_dev") and "|   dropout |" in tail[1] and len(tail) == 10
    assert tail[-3].startswith(f"MLflow parent run: {parent_id}  http://") and parent_id in tail[-3].split()[-1]
    children_ids = [r.info.run_id for r in client.search_runs(
        [parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'")]
    assert tail[-2].startswith("MLflow charts (3 runs, swept keys against the headline figures): http://")
    assert tail[-2].endswith(f"viewStateShareKey=sweep-{parent_id}-charts&compareRunsMode=CHART") and len(children_ids) == 3
    # the saved views the URLs open list the sweep's children (cl_bench.tracking.ui_views)
    view = json.loads(client.get_experiment(parent.info.experiment_id).tags[f"mlflow.sharedViewState.sweep-{parent_id}"])
    assert json.loads(view["state"])["searchFilter"] == f"tags.`mlflow.parentRunId` = '{parent_id}'"
    assert tail[-1] == f"full report: cl-bench-report --parent-run {parent_id}"
    assert "| 0.2 |" in parent.data.tags["mlflow.note.content"].replace("  ", " ").replace("  ", " ").replace("  ", " ")
    assert "sweep_table.md" in {a.path for a in client.list_artifacts(parent_id)}
    # the parent run's page shows the sweep's params and its best point's metrics, under a name that fits
    parent = client.get_run(parent_id)
    assert parent.data.tags["mlflow.runName"] == "sweep: dropout"
    assert parent.data.params["dropout"] == "0, 0.1, 0.2" and parent.data.params["sweep.jobs"] == "3"
    best = max(client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'"),
               key=lambda run: run.data.metrics["select/best_stsb_dev"])
    assert parent.data.metrics["select/best_stsb_dev"] == pytest.approx(best.data.metrics["select/best_stsb_dev"])
    assert parent.data.params["best.dropout"] == f"{float(best.data.params['dropout']):g}"
    assert parent.data.metrics["sweep/finished_jobs"] == 3 and parent.data.metrics["sweep/failed_jobs"] == 0
    # method.fixed_dropout_mask cannot act at dropout 0: n/a there, so every child logs the same keys
    children = [json.loads(p.read_text()) for p in sorted((tmp_path / "sweep").glob("*/params.json"))]
    assert len(children) == 3 and [c["method.fixed_dropout_mask"] for c in children] == ["n/a", False, False]
    assert len({frozenset(c) for c in children}) == 1
    assert swept_keys(load_run_dirs(tmp_path / "sweep")) == ["dropout"]


@pytest.mark.slow  # a 2 × 2 sweep of a tiny model (~4 min on a busy 2-core machine)
def test_the_mission_sweep_on_the_tiny_model_is_headed_by_method_and_dropout(tiny_bert: Path, data_dir: Path,
                                                                            tmp_path: Path) -> None:
    proc = subprocess.run(
        [shutil.which("cl-bench"), "-m", "method=simcse,sg_opt", "dropout=0,0.1", f"model.name_or_path={tiny_bert}",
         "data=wiki1m_head", "data.limit=16", "batch_size=8", "train.max_steps=1", "train.eval_steps=1", "eval=quick",
         "eval.anisotropy=false", "train.progress_bar=false", "logger=none",
         "hydra.sweep.dir=sweep"],
        cwd=tmp_path, capture_output=True, text=True, env=cli_env(data_dir), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    tail = lines[max(i for i, line in enumerate(lines) if line.startswith("Sweep over")):]
    assert tail[0].startswith("Sweep over method × dropout: best_stsb_dev (dev, checkpoint selection")
    assert [cell.strip() for cell in tail[1].strip("|").split("|")] == ["dropout \\ method", "simcse", "sg_opt"]
    assert [line.split("|")[1].strip() for line in tail[3:5]] == ["0", "0.1"]
    assert any(line.strip().startswith("loss.tau: 0.05 (method=simcse); 0.01 (method=sg_opt)") for line in tail)
