"""Hydra callback: one MLflow parent run per multirun, children are the jobs.

``on_multirun_start`` runs once in the launching process, before any job: it creates the MLflow
store and experiment (avoiding SQLite's table-creation race under parallel joblib jobs) and the
parent run, whose id is written to ``<sweep dir>/mlflow_parent_run_id.txt`` for the jobs.
The parent is closed at the end of the sweep (or at exit if a job's failure aborted Hydra) with a
summary of which children failed.
"""

from __future__ import annotations

import atexit
import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from cl_bench.rundir import SweepDir
from cl_bench.tracking.mlflow_logger import default_tracking_uri, ensure_experiment

log = logging.getLogger(__name__)


def tracking_settings(config: DictConfig) -> tuple[bool, str, str]:
    """(enabled, tracking_uri, experiment_name) from a composed config."""
    logger = config.get("logger", {})
    uri = logger.get("tracking_uri") or default_tracking_uri()
    return bool(logger.get("enabled", True)), uri, str(logger.get("experiment_name", "cl-bench"))


class MLflowSweepCallback(Callback):
    """Creates and closes the MLflow parent run of a Hydra multirun."""

    def __init__(self) -> None:
        self.parent_run_id: str | None = None
        self.tracking_uri: str | None = None
        self._closed = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        enabled, uri, experiment_name = tracking_settings(config)
        if not enabled:
            return
        import mlflow

        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        try:
            experiment_id = ensure_experiment(uri, experiment_name)
            client = mlflow.MlflowClient(tracking_uri=uri)
            overrides = " ".join(config.hydra.overrides.task)
            run = client.create_run(
                experiment_id,
                run_name=f"sweep {sweep_dir.name}",
                tags={"sweep": str(sweep_dir), "sweep.overrides": overrides[:5000], "sweep.parent": "true"},
            )
        except Exception as err:
            log.warning("MLflow unavailable at %s (%s): sweep jobs will log locally only", uri, err)
            return
        self.parent_run_id, self.tracking_uri = run.info.run_id, uri
        SweepDir(sweep_dir).parent_run_id.write_text(self.parent_run_id)
        atexit.register(self._close)  # Hydra exits early when a job failed: still close the parent

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._close()

    def _close(self) -> None:
        if self._closed or self.parent_run_id is None:
            return
        self._closed = True
        try:
            close_parent_run(self.tracking_uri, self.parent_run_id)
        except Exception as err:
            log.warning("could not close MLflow parent run %s: %s", self.parent_run_id, err)


def close_parent_run(tracking_uri: str, parent_run_id: str) -> dict[str, list[str]]:
    """Tag the parent with its children's outcomes and end it (FAILED if any child failed).

    Returns:
        {"finished": [...], "failed": [...], "killed": [...], "running": [...]} child run names.
    """
    import mlflow

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
    status = "FAILED" if summary["failed"] else "FINISHED"
    client.set_terminated(parent_run_id, status)
    if summary["failed"]:
        log.error("sweep: %d of %d jobs failed: %s", len(summary["failed"]), len(children), ", ".join(summary["failed"]))
    return summary
