"""``cl-bench-sync RUN_DIR``: upload what a run recorded locally to MLflow after the fact.

Used when the tracking server was down during (part of) a run: params, tags, the metrics lines that
never reached MLflow, results.json, config and plots are sent, and the MLflow run gets the run's
final status (so it is not left RUNNING; a folder whose process was killed without a word gets KILLED). Lines that
already reached MLflow are not sent twice, and a sync cut short continues in the run it made. A sweep folder syncs
each job and ends the parent run a killed launcher left RUNNING.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from cl_bench.tracking.metric_names import upgrade_record
from cl_bench.tracking.mlflow_logger import (
    default_tracking_uri,
    ensure_experiment,
    import_mlflow,
    metric_batch,
)
from cl_bench.tracking.mlflow_objects import inputs_of
from cl_bench.utils.arguments import OneLineParser
from cl_bench.utils.atomic import write_text
from cl_bench.utils.rundir import RunDir, SweepDir

log = logging.getLogger(__name__)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def _find_run(client: Any, experiment_id: str, run_dir_tag: str | None) -> str | None:
    """The run an interrupted earlier upload of this folder created (its ``run_dir`` tag), so none is made twice."""
    if not run_dir_tag or "'" in run_dir_tag:
        return None
    found = client.search_runs([experiment_id], f"tags.run_dir = '{run_dir_tag}'", max_results=1)
    return found[0].info.run_id if found else None


def sync_run(run_dir: str | Path, tracking_uri: str | None = None, experiment_name: str | None = None) -> str:
    """Upload a run folder's local record (training or ``mode=eval``) to the run's own store; returns the run id.

    The store, experiment and run name are the ones the run recorded (``tracking.json``), unless given; the MLflow
    run is the one it logged to, else the one an interrupted earlier sync made, else a new one. A folder without
    ``status.json`` (its process was killed: SIGKILL leaves no word) is marked KILLED, in the folder and in MLflow.
    """
    from mlflow.entities import Param

    mlflow = import_mlflow()

    run_dir = Path(run_dir)
    files = RunDir(run_dir)
    if not (files.is_run() or files.params.is_file() or files.run_files()):
        raise FileNotFoundError(f"{run_dir}: no .hydra/config.yaml, params.json or results.json: not a cl-bench run "
                                "directory")
    recorded = _read_json(files.tracking) or {}
    uri = tracking_uri or recorded.get("tracking_uri") or default_tracking_uri()
    experiment_name = experiment_name or recorded.get("experiment_name") or "cl-bench"
    client = mlflow.MlflowClient(tracking_uri=uri)
    tags = _read_json(files.tags) or {}
    run_name = recorded.get("run_name") or tags.get("mlflow.runName")
    run_id = files.run_id.read_text().strip() if files.run_id.is_file() else None
    sent = int(files.sent_lines.read_text()) if files.sent_lines.is_file() else 0
    if run_id is not None:
        try:
            client.get_run(run_id)
        except Exception:
            run_id, sent = None, 0  # the run is not in this store: create it anew
    if run_id is None:
        experiment_id = ensure_experiment(uri, experiment_name)
        run_id = _find_run(client, experiment_id, tags.get("run_dir"))
        if run_id is None:
            run_tags = {**tags, **({"mlflow.runName": run_name} if run_name else {})}
            run_id = client.create_run(experiment_id, tags=run_tags, run_name=run_name).info.run_id
        write_text(files.run_id, run_id)
        write_text(files.sent_lines, "0")
        sent = 0  # a run found again holds some lines: MLflow keeps one copy of a repeated (key, step, time, value)
    logged = client.get_run(run_id).data.params
    params = _read_json(files.params) or {}
    items = [Param(k, str(v)[:6000]) for k, v in params.items() if k not in logged]
    for start in range(0, len(items), 100):  # MLflow's batch limit is 100 params
        client.log_batch(run_id, params=items[start : start + 100])
    lines = files.metrics.read_text().splitlines() if files.metrics.is_file() else []
    # a run logged under the old flat names goes up under the current ones (metric_names.upgrade_record), unless
    # part of it already reached MLflow under the old ones: a series is not split between two names
    rename = sent == 0
    for index in range(sent, len(lines)):
        record = json.loads(lines[index])
        client.log_batch(run_id, metrics=metric_batch(upgrade_record(record, series=True) if rename else record))
        write_text(files.sent_lines, str(index + 1))
    datasets = _read_json(files.datasets)
    if datasets and not client.get_run(run_id).inputs.dataset_inputs:  # the run's data, where MLflow missed them

        client.log_inputs(run_id, datasets=inputs_of(datasets))
    for path in (files.results, files.config):
        if path.is_file():
            client.log_artifact(run_id, str(path))
    for png in sorted(run_dir.glob("*.png")):
        client.log_artifact(run_id, str(png), "plots")
    status = _read_json(files.status)
    if status is None:  # the process died without a word (SIGKILL, power): the folder says so from now on
        status = {"status": "KILLED", "error": "no final status recorded (process died); marked by cl-bench-sync",
                  "time": time.time()}
        write_text(files.status, json.dumps(status, indent=2, sort_keys=True))
    if status.get("error"):
        client.set_tag(run_id, "error", str(status["error"])[:5000])
    client.set_terminated(run_id, status["status"])
    return run_id


def is_sweep_dir(path: str | Path) -> bool:
    """True for a Hydra multirun folder of cl-bench (its parent run id or varied keys recorded)."""
    sweep = SweepDir(path)
    return sweep.parent_run_id.is_file() or sweep.varied_keys_file.is_file()


def sync_sweep(sweep_dir: str | Path, tracking_uri: str | None = None,
               experiment_name: str | None = None) -> list[tuple[Path, str]]:
    """Sync every job folder of a sweep (:func:`sync_run`), then end its MLflow parent run if it was left RUNNING
    (a killed launcher): KILLED, or FAILED when a job failed. Returns (job folder, run id) pairs."""
    sweep = SweepDir(sweep_dir)
    jobs = sorted((p for p in Path(sweep_dir).iterdir() if p.is_dir() and (RunDir(p).is_run() or RunDir(p).params.is_file())),
                  key=lambda p: (len(p.name), p.name))
    synced = [(job, sync_run(job, tracking_uri, experiment_name)) for job in jobs]
    recorded = _read_json(sweep.tracking) or {}
    uri = tracking_uri or recorded.get("tracking_uri") or default_tracking_uri()
    if sweep.parent_run_id.is_file():
        parent = sweep.parent_run_id.read_text().strip()
        if import_mlflow().MlflowClient(tracking_uri=uri).get_run(parent).info.status == "RUNNING":
            close_parent_run(uri, parent, killed=True)
    return synced


def close_parent_run(tracking_uri: str, parent_run_id: str, killed: bool = False) -> dict[str, list[str]]:
    """Tag a sweep's parent run with its children's outcomes and end it: FAILED if any child failed, else KILLED if
    the launcher was stopped (``killed``) or a child was killed or never ended, else FINISHED.

    Returns:
        {"finished": [...], "failed": [...], "killed": [...], "running": [...]} child run names.
    """
    mlflow = import_mlflow()

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    parent = client.get_run(parent_run_id)
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'", max_results=10000
    )
    summary: dict[str, list[str]] = {"finished": [], "failed": [], "killed": [], "running": []}
    for child in children:
        name = child.data.tags.get("mlflow.runName", child.info.run_id)
        summary.setdefault(child.info.status.lower(), []).append(name)
    client.set_tag(parent_run_id, "sweep.children", str(len(children)))
    client.set_tag(parent_run_id, "sweep.failed_children", ", ".join(sorted(summary["failed"])) or "none")
    status = ("FAILED" if summary["failed"] else
              "KILLED" if killed or summary["killed"] or summary["running"] else "FINISHED")
    client.set_terminated(parent_run_id, status)
    if summary["failed"]:
        log.error("sweep: %d of %d jobs failed: %s", len(summary["failed"]), len(children), ", ".join(summary["failed"]))
    return summary


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    parser = OneLineParser(prog="cl-bench-sync", description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", help="run folders of cl-bench runs (training or mode=eval) or sweep folders")
    parser.add_argument("--tracking-uri", default=None,
                        help="default: the store the run recorded (tracking.json), else $MLFLOW_TRACKING_URI or "
                             "sqlite:///mlflow.db here")
    parser.add_argument("--experiment-name", default=None, help="default: the run's own, else cl-bench")
    args = parser.parse_args(argv)
    missing = [run_dir for run_dir in args.run_dirs if not Path(run_dir).is_dir()]
    if missing:  # bad input: one line, exit 2, before any store is opened (or created)
        print(f"cl-bench-sync: error: {missing[0]}: no such run directory", file=sys.stderr)
        sys.exit(2)
    failed = 0
    for run_dir in args.run_dirs:
        try:
            if is_sweep_dir(run_dir):
                for job, run_id in sync_sweep(run_dir, args.tracking_uri, args.experiment_name):
                    print(f"{job}: synced to MLflow run {run_id}")
                continue
            run_id = sync_run(run_dir, args.tracking_uri, args.experiment_name)
            print(f"{run_dir}: synced to MLflow run {run_id}")
        except Exception as err:
            failed += 1
            print(f"cl-bench-sync: error: {run_dir}: {err}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
