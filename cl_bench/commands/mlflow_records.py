"""What a run records in MLflow beyond params and metrics: its data sets, its best checkpoint as a model, its
system metrics (the settings ``logger.log_model`` and ``logger.system_metrics``).

The MLflow calls are :class:`cl_bench.tracking.mlflow_logger.RunTracker`'s (every failure one warning, the run goes
on); this module decides what to log from the run's config and builds the model the way ``cl-bench-export`` does
(:func:`cl_bench.commands.st_model.sentence_transformer_of`: one implementation of the sentence-transformers folder).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from cl_bench.commands.st_model import ExportError, locate_run, pooling_settings, sentence_transformer_of
from cl_bench.tracking.mlflow_objects import log_sentence_transformer
from cl_bench.utils.rundir import ENCODER_META_FILE

log = logging.getLogger(__name__)


def system_metrics_on(value: Any) -> bool:
    """``logger.system_metrics``: ``true``/``false`` as given, ``auto`` on when CUDA is available (torch is asked
    only then)."""
    text = str(value).strip().lower()
    if text != "auto":
        return text == "true"
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def logs_model(cfg: DictConfig, multirun: bool) -> bool:
    """Does this job log its best checkpoint as an MLflow model itself? ``all``: every training job; ``best``: a
    single run (a sweep's best job is logged by the sweep's callback at its end, :func:`log_best_job_model`)."""
    setting = str(cfg.logger.get("log_model", "best"))
    return cfg.mode == "train" and (setting == "all" or (setting == "best" and not multirun))


def train_file_name(cfg: DictConfig) -> str | None:
    """The training corpus as provenance's ``data_sha256`` names it (relative to the data root when inside it)."""
    if cfg.mode != "train":
        return None
    root, train_file = Path(cfg.paths.data_dir).absolute(), Path(cfg.data.train_file).absolute()
    return train_file.relative_to(root).as_posix() if train_file.is_relative_to(root) else str(train_file)


def log_data(tracker: Any, cfg: DictConfig, provenance: dict[str, Any]) -> None:
    """The run's training corpus and evaluation sets as MLflow dataset inputs, digests from ``provenance``."""
    tracker.log_datasets(provenance.get("data_sha256") or {}, cfg.paths.data_dir, train_file_name(cfg))


def model_requirements() -> list[str]:
    """The logged model's pip requirements: the versions it was saved with (MLflow would otherwise infer them by
    loading the model in a subprocess)."""
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in ("sentence-transformers", "transformers", "torch")]


def log_best_model(run_dir: str | Path, step: int, log_model: Callable[..., str | None],
                   log_pyfunc: Callable[..., str | None] | None = None) -> str | None:
    """Log a run's ``best_model/`` as an MLflow sentence-transformers model through ``log_model`` (``RunTracker.
    log_model``, or the sweep callback's); returns its ``models:/<id>`` URI. A checkpoint with no
    sentence-transformers equivalent (a prompted encoder, :func:`cl_bench.commands.st_model.pooling_settings`) goes
    through ``log_pyfunc`` (``RunTracker.log_model`` with :func:`cl_bench.commands.mlflow_pyfunc.log_pyfunc_encoder`: cl-bench's own encoder as a pyfunc model,
    :mod:`cl_bench.commands.mlflow_pyfunc`); a missing sentence-transformers (the optional ``st`` extra) is one
    warning and no model."""
    import importlib.util

    if importlib.util.find_spec("sentence_transformers") is None:  # the optional `st` extra
        log.warning("no MLflow model logged: sentence-transformers is not installed (pip install -e '.[st]'), "
                    "or set logger.log_model=none")
        return None
    try:
        info = locate_run(run_dir)
    except ExportError as err:
        log.warning("no MLflow model logged: %s", err)
        return None
    try:
        settings = pooling_settings(info)
    except ExportError as err:  # a prompted pooler: cl-bench's own encoder as a pyfunc model
        if log_pyfunc is None or not (info.model_dir / ENCODER_META_FILE).is_file():
            log.warning("no MLflow model logged: %s", err)
            return None
        uri = log_pyfunc(info.model_dir, step, pip_requirements=[*model_requirements(), "cl-bench"])
        if uri is not None:
            log.info("best checkpoint logged to MLflow as %s (pyfunc: %s)", uri, err)
        return uri
    try:
        with sentence_transformer_of(info, settings) as model:
            uri = log_model(model, step, pip_requirements=model_requirements())
    except Exception as err:  # noqa: BLE001 (a checkpoint sentence-transformers cannot build: the run's figures stand)
        log.warning("no MLflow model logged: %s: %s", type(err).__name__, str(err).splitlines()[0][:200] if str(err) else "")
        return None
    if uri is not None:
        log.info("best checkpoint logged to MLflow as %s", uri)
    return uri


def log_best_job_model(tracking_uri: str, run_dir: Path, run_id: str, step: int) -> str | None:
    """``logger.log_model=best`` in a sweep: log its best job's checkpoint under that job's run (from the
    launching process, after the last job); a failure is one warning."""
    def send(model: Any, step: int, pip_requirements: list[str]) -> str | None:
        try:
            return log_sentence_transformer(tracking_uri, run_id, model, step, pip_requirements=pip_requirements).model_uri
        except Exception as err:  # tracking must never fail the sweep
            log.warning("MLflow log_model failed for %s (%s: %s)", run_dir, type(err).__name__, str(err)[:200])
            return None

    def send_pyfunc(model_dir: Path, step: int, pip_requirements: list[str]) -> str | None:
        from cl_bench.commands.mlflow_pyfunc import log_pyfunc_encoder

        try:
            return log_pyfunc_encoder(tracking_uri, run_id, model_dir, step, pip_requirements=pip_requirements).model_uri
        except Exception as err:  # tracking must never fail the sweep
            log.warning("MLflow log_model failed for %s (%s: %s)", run_dir, type(err).__name__, str(err)[:200])
            return None

    return log_best_model(run_dir, step, send, send_pyfunc)
