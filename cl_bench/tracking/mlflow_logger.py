"""Run tracking that never loses a number: the run directory first, MLflow second.

Every metric goes to ``metrics.jsonl`` and the final figures to ``results.json`` in the Hydra
run directory *before* MLflow is called, so a dead tracking server loses nothing; MLflow errors
become one warning and the run goes on.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from cl_bench.tracking.mlflow_objects import dataset_records, inputs_of, log_sentence_transformer
from cl_bench.tracking.names import PROVENANCE_TAG_PREFIX
from cl_bench.tracking.params import flatten
from cl_bench.utils.atomic import write_text
from cl_bench.utils.rundir import RunDir

log = logging.getLogger(__name__)

#: loggers that narrate a SQLite store's creation and schema migration at INFO ("Creating initial MLflow
#: database tables...", alembic's "Context impl SQLiteImpl"): a store's first use is no news to a user
STORE_CHATTER_LOGGERS = ("mlflow.store.db.utils", "alembic")


def import_mlflow() -> Any:
    """``import mlflow`` with the store-creation chatter (:data:`STORE_CHATTER_LOGGERS`) at WARNING.

    Set after the import: MLflow's own logging set-up at import resets the levels of its child loggers.
    """
    import mlflow

    for name in STORE_CHATTER_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    return mlflow


#: the experiment tag MLflow 3's UI reads an experiment's kind from, and cl-bench's kind: model training (the UI
#: then opens the experiment on its runs table, not on the GenAI traces overview)
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"


def default_tracking_uri(launch_dir: str | Path | None = None) -> str:
    """``$MLFLOW_TRACKING_URI``, else MLflow's own default store ``sqlite:///mlflow.db`` in the launch dir."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path(launch_dir or os.getcwd()).resolve() / 'mlflow.db'}"


def absolute_tracking_uri(uri: str, launch_dir: str | Path | None = None) -> str:
    """``uri`` with a relative SQLite file or store folder made absolute (against ``launch_dir``, default the current
    folder): what a run records, so ``cl-bench-sync`` started anywhere reaches the run's own store."""
    base = Path(launch_dir or os.getcwd())
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return f"sqlite:///{(base / uri[len('sqlite:///'):]).resolve()}"
    if "://" not in uri and not uri.startswith("databricks"):
        return str((base / uri).resolve())
    return uri


def local_store(tracking_uri: str) -> Path | None:
    """The file or folder of a local MLflow store (``sqlite:///PATH``, ``file:PATH`` or a bare path); None for a
    server (``http(s)://``, ``databricks``, another database): what a command that only reads a store checks exists,
    since MLflow's client creates a missing one (the folder and an empty database) at its first call."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri[len("sqlite:///") :])
    if tracking_uri.startswith("file:"):
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        return Path(url2pathname(urlparse(tracking_uri).path))
    return None if "://" in tracking_uri or tracking_uri.startswith("databricks") else Path(tracking_uri)


def ui_url(tracking_uri: str, experiment_id: str, run_id: str | None = None) -> str:
    """Where the MLflow UI shows an experiment's runs table (or one run).

    A server URI is its own UI; a local store is what ``mlflow ui`` (default port 5000) serves.
    ``workflowType=machine_learning`` switches MLflow 3's UI to "Model training" (its runs table): in a
    fresh browser it opens every experiment on the GenAI "Overview: Traces 0" page, whatever the
    experiment's tags (checked in headless Chromium, ``tests/commands/test_mlflow_ui.py``).
    """
    base = tracking_uri.rstrip("/") if tracking_uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"
    page = f"runs/{run_id}" if run_id else "runs"
    return f"{base}/#/experiments/{experiment_id}/{page}?workflowType=machine_learning"


def ensure_experiment(tracking_uri: str, experiment_name: str, artifact_root: str | None = None) -> str:
    """Create the store (schema migration) and the experiment once; returns the experiment id.

    The experiment is tagged as model training (:data:`EXPERIMENT_KIND_TAG`), also one that exists without the tag.

    Call this in the launching process before parallel jobs start: a fresh SQLite store hit by
    several processes at once fails MLflow's table creation ("duplicate column name").
    """
    mlflow = import_mlflow()

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is not None:
        if EXPERIMENT_KIND_TAG not in experiment.tags:  # one made elsewhere: cl-bench's runs are training runs
            client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return experiment.experiment_id
    location = None
    if artifact_root is None and tracking_uri.startswith("sqlite:///"):
        # Keep artifacts beside the database, where `mlflow ui` run from that directory finds them.
        db_dir = local_store(tracking_uri).parent
        artifact_root = str(db_dir / "mlruns")
    if artifact_root is not None:
        location = Path(artifact_root).resolve().as_uri() + f"/{experiment_name}"
    try:
        return client.create_experiment(experiment_name, artifact_location=location,
                                        tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
    except Exception:  # another process created it in between
        return client.get_experiment_by_name(experiment_name).experiment_id


class RunTracker:
    """One tracked run: MLflow (optional) plus local files in ``run_dir``.

    Args:
        run_dir: the Hydra run directory (results.json, metrics.jsonl go here).
        enabled: log to MLflow at all.
        tracking_uri: MLflow store or server URI.
        experiment_name: MLflow experiment.
        run_name: MLflow run name.
        parent_run_id: makes this run a child (sweeps).
    """

    def __init__(
        self,
        run_dir: str | Path,
        enabled: bool = True,
        tracking_uri: str | None = None,
        experiment_name: str = "cl-bench",
        run_name: str | None = None,
        parent_run_id: str | None = None,
        system_metrics: bool = False,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.files = RunDir(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.enabled = enabled
        self.tracking_uri = tracking_uri or default_tracking_uri()
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.parent_run_id = parent_run_id
        self.system_metrics = system_metrics
        self._system_monitor: Any = None
        self.run_id: str | None = None
        self._client: Any = None
        self._mlflow_ok = enabled
        self._metrics_path = self.files.metrics
        self._lines_written = _count_lines(self._metrics_path)
        sent_file = self.files.sent_lines
        self._lines_sent = int(sent_file.read_text()) if sent_file.is_file() else 0

    # ----- MLflow guard -----------------------------------------------------------------------
    def _mlflow(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call an MLflow client function; on failure warn once and continue without MLflow."""
        if not self._mlflow_ok or self._client is None:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # tracking must never stop training
            self._mlflow_ok = False
            log.warning(
                "MLflow %s failed (%s: %s); continuing with local files only in %s (upload later with cl-bench-sync)",
                what,
                type(err).__name__,
                str(err).splitlines()[0][:200],
                self.run_dir,
            )
            return None

    def start(self, params: dict[str, Any], tags: dict[str, str], resume: bool = False) -> None:
        """Create the MLflow run (or, with ``resume``, continue the one recorded in the run dir).

        Params and tags are also written to the run directory, for ``cl-bench-sync``.
        """
        parent_tag = {"mlflow.parentRunId": self.parent_run_id} if self.parent_run_id else {}
        if not resume or not self.files.params.is_file():
            _write_json(self.files.params, flatten(params))
            _write_json(self.files.tags, {**tags, **parent_tag})
        if not resume or not self.files.tracking.is_file():  # where this run logs: cl-bench-sync sends it there
            _write_json(self.files.tracking, {
                "tracking_uri": absolute_tracking_uri(self.tracking_uri), "experiment_name": self.experiment_name,
                "run_name": self.run_name, "parent_run_id": self.parent_run_id, "enabled": self.enabled})
        if not self.enabled:
            return
        mlflow = import_mlflow()

        previous = self.files.run_id
        if resume and previous.is_file():
            try:
                self._client = mlflow.MlflowClient(tracking_uri=self.tracking_uri)
                self.run_id = previous.read_text().strip()
                self._client.update_run(self.run_id, status="RUNNING")
                log.info("continuing MLflow run %s", self.run_id)
                self._start_system_metrics(resume=True)
            except Exception as err:
                self._client, self.run_id, self._mlflow_ok = None, None, False
                log.warning("MLflow unavailable at %s (%s); logging to %s only", self.tracking_uri, err, self.run_dir)
            return
        try:
            self._client = mlflow.MlflowClient(tracking_uri=self.tracking_uri)
            experiment_id = ensure_experiment(self.tracking_uri, self.experiment_name)
            run_tags = {**tags, **parent_tag, **({"mlflow.runName": self.run_name} if self.run_name else {})}
            run = self._client.create_run(experiment_id, tags=run_tags, run_name=self.run_name)
            self.run_id = run.info.run_id
        except Exception as err:
            self._client, self._mlflow_ok = None, False
            log.warning("MLflow unavailable at %s (%s); logging to %s only", self.tracking_uri, err, self.run_dir)
            return
        self.files.run_id.write_text(self.run_id)
        self._start_system_metrics()
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in flatten(params).items()]
        for start in range(0, len(items), 100):  # MLflow's batch limit is 100 params
            self._mlflow("log_params", self._client.log_batch, self.run_id, params=items[start : start + 100])

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Append to metrics.jsonl, then send to MLflow (non-finite values are kept locally only)."""
        record = {"step": step, "time": time.time(), **{k: float(v) for k, v in metrics.items()}}
        with self._metrics_path.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
        self._lines_written += 1
        if self.run_id is None or not self._mlflow_ok:
            return
        # log_batch returns None; a failure shows in self._mlflow_ok
        self._mlflow("log_metrics", self._client.log_batch, self.run_id, metrics=metric_batch(record))
        if self._mlflow_ok:
            self._lines_sent = self._lines_written
            self.files.sent_lines.write_text(str(self._lines_sent))

    def log_results(self, results: dict[str, Any], step: int | None = None,
                    provenance: dict[str, Any] | None = None) -> Path:
        """Write results.json (always, first), then log the figures as MLflow metrics and artifact.

        A text entry (the ``pooler`` an evaluation used) goes to results.json and becomes the tag
        ``eval.<key>`` (``eval.pooler``): the bare ``pooler`` tag is the config group's, absent where
        the group cannot act (IS-BERT pools with its own CNN).
        ``provenance`` (what the figures were measured with, :mod:`cl_bench.commands.provenance`) goes into
        results.json under ``provenance`` and to MLflow as tags ``provenance.<field>``.
        """
        path = self.files.results
        _write_json(path, {**results, **({"provenance": provenance} if provenance else {})})
        texts = {k: v for k, v in results.items() if isinstance(v, str)}
        self.log_metrics({k: v for k, v in results.items() if k not in texts}, step)
        self.set_tags({f"eval.{k}": v for k, v in texts.items()})
        if provenance:  # a mapping (data_sha256, packages) as JSON text: a tag holds text (cut at 5000 characters)
            self.set_tags({f"{PROVENANCE_TAG_PREFIX}{k}": v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                           for k, v in provenance.items()})
        self.log_artifact(path)
        return path

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a file to the MLflow run (no-op without MLflow)."""
        if self.run_id is not None:
            self._mlflow("log_artifact", self._client.log_artifact, self.run_id, str(path), artifact_path)

    def set_tags(self, tags: dict[str, str]) -> None:
        """Set tags on the MLflow run."""
        for key, value in tags.items():
            if self.run_id is not None:
                self._mlflow("set_tag", self._client.set_tag, self.run_id, key, str(value)[:5000])

    def ui_url(self) -> str | None:
        """Where the MLflow UI shows this run (None without an MLflow run)."""
        if self.run_id is None or self._client is None:
            return None
        try:
            experiment_id = self._client.get_run(self.run_id).info.experiment_id
        except Exception:  # noqa: BLE001 (a URL is a convenience)
            return None
        return ui_url(self.tracking_uri, experiment_id, self.run_id)

    @property
    def client(self) -> Any:
        """The MLflow client of this run (None without MLflow)."""
        return self._client

    @property
    def mlflow_ok(self) -> bool:
        """False once MLflow failed (or was never reached): the run dir then holds what is missing."""
        return self.run_id is not None and self._mlflow_ok

    def finish(self, status: str = "FINISHED", error: str | None = None) -> None:
        """End the run with FINISHED, FAILED or KILLED: in the run dir always, in MLflow when reachable.

        When MLflow failed during the run, a warning names the ``cl-bench-sync`` command that uploads
        the local record (and ends the MLflow run, so it is not left RUNNING).
        """
        _write_json(self.files.status, {"status": status, "error": error, "time": time.time()})
        if self.enabled and not self.mlflow_ok:
            log.warning("MLflow did not receive everything; upload later with: cl-bench-sync %s", self.run_dir)
        if self.run_id is None:
            return
        if error:
            self.set_tags({"error": error})
        self._stop_system_metrics()
        self._mlflow("set_terminated", self._client.set_terminated, self.run_id, status)

    # ----- MLflow's own records: system metrics, dataset inputs, the logged model ---------------
    def _start_system_metrics(self, resume: bool = False) -> None:
        """Start MLflow's system-metrics monitor on this run (``system_metrics``): CPU, memory, disk, network, and
        the GPU's utilisation and memory where ``pynvml`` (package ``nvidia-ml-py``) is installed, every
        ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` seconds (MLflow's default 10) as ``system/...`` metrics.
        Off: nothing is imported or started."""
        if not self.system_metrics or self.run_id is None:
            return
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        monitor = SystemMetricsMonitor(self.run_id, resume_logging=resume, tracking_uri=self.tracking_uri)
        self._mlflow("system metrics", monitor.start)
        self._system_monitor = monitor

    def _stop_system_metrics(self) -> None:
        """Stop the monitor and send its last samples (before the run ends: it stops on a run not RUNNING)."""
        if self._system_monitor is not None:
            monitor, self._system_monitor = self._system_monitor, None
            self._mlflow("system metrics", monitor.finish)

    def log_datasets(self, data_sha256: dict[str, str], data_root: str | Path, train_file: str | None) -> None:
        """Log the run's data as MLflow dataset inputs (:func:`cl_bench.tracking.mlflow_objects.dataset_inputs`):
        ``data_sha256`` is provenance's ``{file: sha256}``, ``train_file`` the corpus's name in it (None for
        ``mode=eval``)."""
        if not data_sha256:
            return

        records = dataset_records(data_sha256, data_root, train_file)
        _write_json(self.files.datasets, records)  # cl-bench-sync logs them where MLflow missed them
        if self.run_id is None or not self._mlflow_ok:
            return
        self._mlflow("log_inputs", lambda: self._client.log_inputs(self.run_id, datasets=inputs_of(records)))

    def log_model(self, model: Any, step: int, pip_requirements: list[str] | None = None,
                  log_fn: Any = None) -> str | None:
        """Log ``model`` (a ``SentenceTransformer``) as this run's MLflow model at ``step`` (the final figures'
        step: MLflow links them to it); returns its URI ``models:/<id>``, None without MLflow or on failure
        (warned once, as every tracking failure: the run goes on). ``log_fn(tracking_uri, run_id, model, step,
        pip_requirements=)`` logs it (default :func:`cl_bench.tracking.mlflow_objects.log_sentence_transformer`;
        the pyfunc fallback passes its own)."""
        if self.run_id is None or not self._mlflow_ok:
            return None

        info = self._mlflow("log_model", log_fn or log_sentence_transformer, self.tracking_uri, self.run_id, model,
                            step, pip_requirements=pip_requirements)
        return None if info is None else info.model_uri


def metric_batch(record: dict[str, Any]) -> list[Any]:
    """MLflow Metric entities of one metrics.jsonl record (non-finite values stay local)."""
    from mlflow.entities import Metric

    timestamp, step = int(record["time"] * 1000), int(record.get("step") or 0)
    return [
        Metric(k, float(v), timestamp, step)
        for k, v in record.items()
        if k not in ("step", "time") and math.isfinite(float(v))
    ]


def _write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str))  # atomic (SaveError on failure)


def _count_lines(path: Path) -> int:
    return sum(1 for _ in path.open()) if path.is_file() else 0
