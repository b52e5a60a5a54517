"""``cl-bench-sync RUN_DIR``: upload what a run recorded locally to MLflow after the fact.

Used when the tracking server was down during (part of) a run: params, tags, the metrics lines that
never reached MLflow, results.json, config and plots are sent, and the MLflow run gets the run's
final status (so it is not left RUNNING). Lines that already reached MLflow are not sent twice.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cl_bench.tracking.metric_names import upgrade_record
from cl_bench.tracking.mlflow_logger import (
    default_tracking_uri,
    ensure_experiment,
    import_mlflow,
    metric_batch,
)
from cl_bench.utils.rundir import RunDir


def sync_run(run_dir: str | Path, tracking_uri: str | None = None, experiment_name: str = "cl-bench") -> str:
    """Upload a run directory's local record; returns the MLflow run id."""
    from mlflow.entities import Param

    mlflow = import_mlflow()

    run_dir = Path(run_dir)
    files = RunDir(run_dir)
    if not files.metrics.is_file() and not files.results.is_file():
        raise FileNotFoundError(f"{run_dir}: no metrics.jsonl or results.json: not a cl-bench run directory")
    uri = tracking_uri or default_tracking_uri()
    client = mlflow.MlflowClient(tracking_uri=uri)
    tags = json.loads(files.tags.read_text()) if files.tags.is_file() else {}
    run_id = files.run_id.read_text().strip() if files.run_id.is_file() else None
    sent = int(files.sent_lines.read_text()) if files.sent_lines.is_file() else 0
    if run_id is not None:
        try:
            client.get_run(run_id)
        except Exception:
            run_id, sent = None, 0  # the run is not in this store: create it anew
    if run_id is None:
        experiment_id = ensure_experiment(uri, experiment_name)
        run_id = client.create_run(experiment_id, tags=tags, run_name=tags.get("mlflow.runName")).info.run_id
        files.run_id.write_text(run_id)
        params = json.loads(files.params.read_text()) if files.params.is_file() else {}
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for start in range(0, len(items), 100):
            client.log_batch(run_id, params=items[start : start + 100])
    lines = files.metrics.read_text().splitlines() if files.metrics.is_file() else []
    # a run logged under the old flat names goes up under the current ones (metric_names.upgrade_record), unless
    # part of it already reached MLflow under the old ones: a series is not split between two names
    rename = sent == 0
    for index in range(sent, len(lines)):
        record = json.loads(lines[index])
        client.log_batch(run_id, metrics=metric_batch(upgrade_record(record, series=True) if rename else record))
        files.sent_lines.write_text(str(index + 1))
    for path in (files.results, files.config):
        if path.is_file():
            client.log_artifact(run_id, str(path))
    for png in sorted(run_dir.glob("*.png")):
        client.log_artifact(run_id, str(png), "plots")
    status = json.loads(files.status.read_text()) if files.status.is_file() else None
    if status is None:
        status = {"status": "KILLED", "error": "no final status recorded (process died)"}
    if status.get("error"):
        client.set_tag(run_id, "error", str(status["error"])[:5000])
    client.set_terminated(run_id, status["status"])
    return run_id


def main(argv: list[str] | None = None) -> None:
    """Console entry point."""
    parser = argparse.ArgumentParser(prog="cl-bench-sync", description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", help="Hydra run directories of cl-bench runs")
    parser.add_argument("--tracking-uri", default=None, help="default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db here")
    parser.add_argument("--experiment-name", default="cl-bench")
    args = parser.parse_args(argv)
    failed = 0
    for run_dir in args.run_dirs:
        try:
            run_id = sync_run(run_dir, args.tracking_uri, args.experiment_name)
            print(f"{run_dir}: synced to MLflow run {run_id}")
        except Exception as err:
            failed += 1
            print(f"cl-bench-sync: error: {run_dir}: {err}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
