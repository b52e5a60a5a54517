"""Hydra's job of ``cl-bench``: check the job's folder and config, train and/or evaluate, record the results (the run
dir's files, MLflow), print the table.

:mod:`cl_bench.commands.cli` imports this module once Hydra's job starts (``_hydra_main``), and only then: its imports
are the job's stack (torch, transformers through the trainer and the encoder, pandas through the tracker), which a
command rejected before Hydra's job never loads.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from cl_bench.commands import mlflow_records
from cl_bench.commands.provenance import eval_settings_line, run_provenance
from cl_bench.config import (
    ConfigError,
    catalog,
    override_keys,
    preflight,
    use_recorded_pooling,
)
from cl_bench.config.early_checks import is_group
from cl_bench.config.params import acting_params
from cl_bench.config.run_folder import FinishedRun, as_recorded, check_run_folder, segment_changes
from cl_bench.eval.embed import NonFiniteEmbeddingError
from cl_bench.eval.mteb import run_mteb
from cl_bench.eval.options import EvalOptions
from cl_bench.eval.registry import split_tasks
from cl_bench.eval.suite import encoding_settings_of, encoding_workload, evaluate, evaluate_dev, format_table
from cl_bench.models.encoder import encoder_from_config
from cl_bench.run_specs import RunSpecs
from cl_bench.tracking import ui_views
from cl_bench.tracking.environment import environment_tags
from cl_bench.tracking.metric_names import final_name, final_names, flat_view, headline_names, select_name
from cl_bench.tracking.metric_names import run_name as run_state_name
from cl_bench.tracking.mlflow_logger import RunTracker
from cl_bench.tracking.names import HOUSEKEEPING, RUN_NAME_CHARS, fit_run_name
from cl_bench.tracking.params import knob_params
from cl_bench.train.checkpoint import UnsafeCheckpointError, check_checkpoint, remove_checkpoint
from cl_bench.train.loop import NonFiniteLossError, TrainingInterrupted, resolve_device, train
from cl_bench.utils import distributed, interrupt
from cl_bench.utils.atomic import SaveError, write_text
from cl_bench.utils.overrides import parsed_overrides
from cl_bench.utils.rundir import INERT_VALUE, RunDir, SweepDir

log = logging.getLogger("cl_bench")


def discard_unused_run_dir(run_dir: Path) -> None:
    """Remove a run directory holding only what Hydra wrote at start (``.hydra/``, the job log).

    A command that failed validation leaves no run under ``outputs/runs/``; the date folder goes
    too when it was its only run. A directory with anything else in it is left alone.
    """
    if not run_dir.is_dir() or any(p.name != ".hydra" and p.suffix != ".log" for p in run_dir.iterdir()):
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    if run_dir.parent.parent.name == "runs":  # outputs/runs/<date>/, then outputs/runs/ and outputs/ if now empty
        for folder in (run_dir.parent, run_dir.parent.parent, run_dir.parent.parent.parent):
            try:
                folder.rmdir()
            except OSError:  # other runs that day (or ever)
                break


def run_tags(cfg: DictConfig, hydra_cfg: Any, inert: Mapping[str, str], device: str | None = None) -> dict[str, str]:
    """MLflow tags: the choices that acted on the run, encoder, sweep, git commit, software.

    A group the run does not use (``inert``, as the preflight found: the augmentation of a method without one, the
    method and loss of ``mode=eval``) gets no tag; no tag holds the text "None".
    """
    choices = dict(hydra_cfg.runtime.choices)
    tags = {
        "mode": str(cfg.mode),
        "method": cfg.method.get("name", choices.get("method")),
        "encoder": str(cfg.model.name_or_path),
        "pooler": cfg.pooler.name,
        "loss": cfg.loss.get("name"),
        "augmentation": choices.get("augmentation"),
        "data": cfg.data.name,
        "experiment": choices.get("experiment"),
        "overrides": hydra_cfg.job.override_dirname or None,
        # the job's overrides one by one, as Hydra passed them: the report reads the swept keys from these
        "overrides.task": json.dumps(list(hydra_cfg.overrides.task)),
        "sweep": str(hydra_cfg.sweep.dir) if hydra_cfg.mode == RunMode.MULTIRUN else None,
        "run_dir": str(hydra_cfg.runtime.output_dir),
    }
    if hydra_cfg.mode == RunMode.MULTIRUN:  # replicates share a point: the MLflow UI groups them by this tag
        tags["point"] = run_name(cfg, hydra_cfg, exclude=("seed", "seeds"), limit=None) if "seed" not in inert else None
    acting = {k: str(v) for k, v in tags.items() if v is not None and k not in inert}
    return {**acting, **{k: v for k, v in environment_tags(device).items() if v not in (None, "None")}}


def run_name(cfg: DictConfig, hydra_cfg: Any, exclude: Sequence[str] = (), limit: int | None = RUN_NAME_CHARS) -> str:
    """The MLflow run name: what tells this run apart from its neighbours in the runs table.

    A sweep child: the values of the keys the sweep varies (``dropout=0 tau=0.1``; the method first when
    the sweep varies it); a single run: the method and its command-line overrides less the housekeeping
    ones (``train.num_threads``, ``eval.cache``: :data:`cl_bench.tracking.names.HOUSEKEEPING`). Keys are
    shown by their last part, a config group by its choice (``+experiment/points=dropout_0.1`` ->
    ``dropout_0.1``). ``exclude``: keys left out (``seed``: the name of the point a replicate belongs to).
    Shortened to ``limit`` characters, the width MLflow's runs table shows (:func:`fit_run_name`).
    """
    head = str(cfg.method.get("name", "")) if cfg.mode == "train" else f"eval {Path(str(cfg.model.name_or_path)).name}"
    overrides = {str(override.key_or_group): override.get_value_string()
                 for _, override in parsed_overrides(list(hydra_cfg.overrides.task)) if not override.is_delete()}
    shown, varied = list(overrides), None
    if hydra_cfg.mode == RunMode.MULTIRUN:
        varied = SweepDir(hydra_cfg.sweep.dir).varied_keys()
        if varied is not None:
            # only what tells the children apart, so it fits MLflow's run-name column; the method is in
            # the parent's name and the tags unless the sweep varies it
            shown = [k for k in shown if k in varied]
            head = head if "method" in varied else ""
    else:
        shown = [k for k in shown if k in override_keys([f"{k}=x"]) and k not in ("mode", "model.name_or_path")
                 and k not in HOUSEKEEPING and k.split(".")[0] not in HOUSEKEEPING]
    parts = [(None, overrides[k].split("/")[-1]) if is_group(k) else (k.split(".")[-1], overrides[k])
             for k in shown if k != "method" and k not in exclude]
    return fit_run_name(head, parts, limit, keys_named_elsewhere=varied is not None) or hydra_cfg.job.name


def _parent_run_id(hydra_cfg: Any) -> str | None:
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    path = SweepDir(hydra_cfg.sweep.dir).parent_run_id
    return path.read_text().strip() if path.is_file() else None


def make_tracker(cfg: DictConfig, run_dir: Path, hydra_cfg: Any):
    """The run tracker for this job (child of the sweep's parent run in a multirun)."""
    name = cfg.logger.run_name or run_name(cfg, hydra_cfg)
    system_metrics = mlflow_records.system_metrics_on(cfg.logger.system_metrics) if cfg.logger.enabled else False
    return RunTracker(
        run_dir,
        enabled=cfg.logger.enabled,
        tracking_uri=cfg.logger.tracking_uri,
        experiment_name=cfg.logger.experiment_name,
        run_name=name,
        parent_run_id=_parent_run_id(hydra_cfg),
        system_metrics=system_metrics,
    )


def evaluate_encoder(encoder: Any, specs: RunSpecs, run_dir: Path) -> dict[str, float]:
    """Final evaluation: cl-bench's own tasks (SentEval protocol) and any ``mteb:<Task>`` entries."""
    own_tasks, mteb_tasks = split_tasks(specs.eval.tasks)
    # eval.pooler acts on the encoder (with_eval_pooler), not here
    options = EvalOptions.from_config(dataclasses.asdict(specs.eval))
    results: dict[str, float] = {}
    if own_tasks:
        results.update(evaluate(encoder, specs.paths.data_dir, own_tasks, options, out_dir=run_dir))
    if mteb_tasks:
        results.update(run_mteb(encoder, mteb_tasks, run_dir, specs.paths.data_dir, options.batch_size,
                                settings=encoding_settings_of(options)))
    return results


class StopSignal:
    """SIGINT/SIGTERM handler: the first signal asks the loop to stop after the current step."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignal:
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread (some launchers): default handling stays
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        interrupt.reset()

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:  # a second signal: stop now
            raise KeyboardInterrupt
        self.signum = signum
        interrupt.request_stop(signum)  # an evaluation stops at its next batch
        log.warning("%s received: stopping after the current step or evaluation batch (send again to stop at once)",
                    signal.Signals(signum).name)

    def requested(self) -> bool:
        return self.signum is not None


def continue_in(resume_from: Path, new_dir: Path) -> None:
    """``train.resume=<dir>`` from a new Hydra run dir: continue in ``<dir>``, leaving no second run dir.

    The job log moves to ``<dir>`` (appended to its own), and the folder Hydra made for this
    process, holding only its ``.hydra/`` and that log, is removed.
    """
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent.resolve() == new_dir.resolve():
            handler.acquire()
            try:
                handler.close()
                handler.baseFilename = str((resume_from / Path(handler.baseFilename).name).resolve())
                handler.mode = "a"
                handler.stream = handler._open()
            finally:
                handler.release()
    discard_unused_run_dir(new_dir)
    log.info("continuing run directory %s", resume_from)


def resume_dir(cfg: DictConfig, hydra_run_dir: Path) -> Path | None:
    """The run directory to continue (``train.resume``), or None for a fresh run."""
    value = str(cfg.train.get("resume", "") or "")
    if value.lower() in ("", "false", "none", "null"):
        return None
    # a folder that is not there was rejected before (preflight: cl_bench.config.check_local_paths)
    path = hydra_run_dir if value.lower() in ("true", "auto") else Path(value)
    checkpoint = RunDir(path).checkpoint
    if checkpoint.is_file():  # a checkpoint that would run code is refused here, before any model loads
        try:
            check_checkpoint(checkpoint)
        except UnsafeCheckpointError as err:
            raise ConfigError(str(err)) from err
    return path


def record_segment(run_dir: Path, params: dict[str, Any]) -> dict[str, str]:
    """Append this resume's segment to the run's ``segments.jsonl`` (its number, when, the resumable keys it set to
    other values than the first segment, :data:`cl_bench.config.run_folder.RESUMABLE_KEYS`) and return it as the
    MLflow tag ``segment.<N>`` (``train.max_steps=200 (was 100)``; "no change" when it changed nothing).
    ``params``: this command's params, as the job records them."""
    files = RunDir(run_dir)
    previous = files.segments.read_text() if files.segments.is_file() else ""
    number = 2 + sum(1 for line in previous.splitlines() if line.strip())  # segment 1: the run's start (params.json)
    changed = segment_changes(run_dir, as_recorded(params))
    record = {"segment": number, "time": time.time(),
              "changed": {k: {"was": was, "now": now} for k, (was, now) in changed.items()}}
    write_text(files.segments, previous + json.dumps(record, default=str) + "\n")
    text = ", ".join(f"{k}={now} (was {was})" for k, (was, now) in changed.items()) or "no change"
    log.info("resumed segment %d of the run in %s: %s", number, run_dir, text)
    return {f"segment.{number}": text}


def run(cfg: DictConfig) -> float | None:
    """Validate, train and/or evaluate, and record the results. Returns the sweep objective."""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    interrupt.stop_with_launcher()  # a job in a launcher's worker process ends with the launcher
    try:
        catalog.use_search_path(list(hydra_cfg.searchpath))  # a launcher's worker process registers them here
    except ValueError as err:
        print(f"cl-bench: error: {err}", file=sys.stderr)
        sys.exit(2)

    tracker = None
    folder_checked = False  # until then a folder holding a run may be another's: no KILLED is written into it
    try:  # start-up: a signal here ends the job as KILLED, with 128+signal
        preflight_error = None
        try:
            if cfg.mode == "eval":
                use_recorded_pooling(cfg, list(hydra_cfg.overrides.task))
            specs = preflight(cfg, list(hydra_cfg.overrides.task))  # the trainer and the evaluation read these
        except ConfigError as err:
            preflight_error, specs = err, None
        try:
            # checked before Hydra's job too (check_command); again here for a sweep's job and a command it did not
            # compose (not on torchrun's ranks > 0: rank 0 may have begun writing in the folder they share); a resume
            # is compared with the inert keys the preflight found
            if distributed.is_main_process():
                check_run_folder(cfg, run_dir, None if specs is None else specs.inert)
            folder_checked = True
        except FinishedRun as done:
            print(f"cl-bench: {done}")
            discard_unused_run_dir(run_dir)  # train.resume=<dir>: the folder Hydra made for this command
            return None
        except ConfigError as err:
            print(f"cl-bench: error: {err}", file=sys.stderr)
            discard_unused_run_dir(run_dir)  # only Hydra's own files: a folder holding a run is never touched
            sys.exit(2)
        try:
            if preflight_error is not None:
                raise preflight_error
            resume_from = resume_dir(cfg, run_dir) if cfg.mode == "train" else None
        except ConfigError as err:
            print(f"cl-bench: error: {err}", file=sys.stderr)
            if not multirun:
                discard_unused_run_dir(run_dir)
                sys.exit(2)
            tracker = make_tracker(cfg, run_dir, hydra_cfg)
            tracker.start(OmegaConf.to_container(cfg, resolve=False), {"mode": str(cfg.mode)})
            tracker.finish("FAILED", error=str(err))
            raise  # Hydra records the job as failed; the other jobs of the sweep go on
        # torchrun ranks > 0 only train; rank 0 tracks, evaluates and writes
        if distributed.is_distributed():
            if multirun:
                print("cl-bench: error: torchrun runs one training job, not a multirun", file=sys.stderr)
                sys.exit(2)
            if not distributed.is_main_process():
                return _train_worker(specs, run_dir, resume_from is not None)
        if resume_from is not None:
            if resume_from.resolve() != run_dir.resolve():
                continue_in(resume_from, run_dir)
            run_dir = resume_from
        elif RunDir(run_dir).run_files():  # train.overwrite_output_dir=true (check_run_folder refused it otherwise)
            log.warning("train.overwrite_output_dir=true: replacing the run in %s (%s)", run_dir,
                        ", ".join(RunDir(run_dir).run_files()))
            RunDir(run_dir).clear_run()
        tracker = make_tracker(cfg, run_dir, hydra_cfg)

        # the values that acted, with the inert keys the preflight found (the specs are not built again)
        params = knob_params(acting_params(cfg, specs.inert), dict(hydra_cfg.runtime.choices))
        segment = record_segment(run_dir, params) if resume_from is not None else None
        if multirun:  # a key acting in some jobs only is n/a where it cannot act, not absent: absent would look swept
            params.update({k: INERT_VALUE for k in SweepDir(hydra_cfg.sweep.dir).partly_inert() if k not in params})
        tags = run_tags(cfg, hydra_cfg, specs.inert, device=str(resolve_device(specs.train.device)))  # where it runs
        tracker.start(params, tags, resume=resume_from is not None)
        sample = cfg.eval.get("sample_pairs")  # the recorded names say when a figure is on a sample (NAMES.md)
        if segment is not None:  # MLflow's params are the first segment's; each later one says what it changed
            tracker.set_tags(segment)
        tracker.log_artifact(RunDir(run_dir).config if RunDir(run_dir).config.is_file() else RunDir(hydra_cfg.runtime.output_dir).config)
    except interrupt.Stopped as stopped:
        if folder_checked or not RunDir(run_dir).run_files():
            (tracker or RunTracker(run_dir, enabled=False)).finish("KILLED", error=str(stopped))
            log.error("%s: the run in %s is marked KILLED", stopped, run_dir)
        _end_job(128 + stopped.signum)

    with StopSignal() as stop:
        try:
            if cfg.mode == "train":
                results = _train_and_evaluate(cfg, specs, run_dir, tracker, stop.requested, resume_from is not None)
            else:
                results = _evaluate(cfg, specs, run_dir, tracker)
        except TrainingInterrupted as interrupted:
            state = interrupted.state
            tracker.log_results(
                {run_state_name("interrupted_at_step"): float(state.step), select_name("best_step"): float(state.best_step),
                 select_name(f"best_{cfg.train.select_metric}", sample): state.best_score},
                state.step,
            )
            tracker.finish("KILLED", error=f"{signal.Signals(stop.signum).name} after step {state.step}")
            log.error("stopped after step %d; continue with: train.resume=%s", state.step, run_dir)
            _end_job(128 + (stop.signum or signal.SIGINT))
        except interrupt.EvaluationInterrupted as interrupted:
            tracker.log_results({**final_names(interrupted.partial, sample), run_state_name("evaluation_interrupted"): 1.0})
            tracker.finish("KILLED", error=str(interrupted))
            log.error("evaluation stopped; the figures computed before the stop are in %s", RunDir(run_dir).results)
            _end_job(128 + interrupted.signum)
        except KeyboardInterrupt:
            tracker.finish("KILLED", error="interrupted")
            _end_job(130)
        except SaveError as err:  # a full disk, a read-only folder: one line, the complete copy that remains
            print(f"cl-bench: error: {err}", file=sys.stderr)
            try:
                tracker.finish("FAILED", error=str(err))
            except SaveError as also:  # status.json did not fit either: MLflow (if reachable) still got FAILED
                log.error("%s", also)
            _end_job(1)
        except (NonFiniteLossError, NonFiniteEmbeddingError) as err:  # diverged: one line, run FAILED, exit 1
            tracker.finish("FAILED", error=f"{type(err).__name__}: {err}")
            if multirun:
                raise  # Hydra records the job as failed
            print(f"cl-bench: error: {err}", file=sys.stderr)
            _end_job(1)
        except Exception as err:
            tracker.finish("FAILED", error=f"{type(err).__name__}: {err}")
            raise
    headline = " · ".join(f"{k} {results[k]:.2f}" for k in headline_names(sample) if isinstance(results.get(k), int | float))
    if headline:  # the run page's description, above its (alphabetical) metrics: the figures compared first
        tracker.set_tags({"mlflow.note.content": headline})
    tracker.finish("FINISHED")

    print(format_table(flat_view(results)))  # the SimCSE-style rows (headed by task; the names are results.json's)
    # a truncated or post-processed table says so beside its figures (precision auto: what it computed in)
    print(eval_settings_line(cfg, str(resolve_device(cfg.train.device))))
    print(f"results: {run_dir / 'results.json'}")
    if tracker.run_id is not None and not multirun:  # a sweep prints its parent's at the end
        print(f"MLflow: {tracker.ui_url()}")
        if tracker.mlflow_ok:  # a store that failed during the run is not asked again (a server's retries take minutes)
            _print_runs_table_url(tracker, cfg)
    return results.get(final_name("sts_avg", sample))


def _print_runs_table_url(tracker: Any, cfg: DictConfig) -> None:
    """Print where MLflow's runs table shows the experiment with the headline figures as columns, sorted by this
    run's selection figure (:func:`cl_bench.tracking.ui_views.runs_table_url`); nothing when MLflow fails."""
    sample = cfg.eval.get("sample_pairs")
    final_avg = final_name("sts_avg", sample)
    order = [select_name(f"best_{cfg.train.select_metric}", sample), final_avg] if cfg.mode == "train" else [final_avg]
    try:
        print(f"MLflow runs table: {ui_views.runs_table_url(tracker.client, tracker.tracking_uri, tracker.run_id, order)}")
    except Exception as err:  # noqa: BLE001 (a URL is a convenience)
        log.warning("no MLflow runs-table view: %s", err)


def with_eval_pooler(encoder: Any, specs: RunSpecs) -> Any:
    """The final evaluation's encoder: ``encoder`` re-pooled with ``eval.pooler`` when set (validated before any model
    loaded: a pooler of the same token states, e.g. AnglE's ``cls_avg`` over a ``cls``-trained encoder).

    Only the final evaluation uses it: the dev evaluation that selects the checkpoint and ``best_model/`` keep the
    training pooler (``mode=eval`` restores that one; ``eval.pooler=`` there scores the checkpoint as the run did).
    """
    name = specs.eval.pooler
    if name is not None and name != encoder.pooler:
        log.info("final evaluation re-pooled with eval.pooler=%s (trained with pooler=%s)", name, encoder.pooler)
        encoder.pooler = str(name)
    return encoder


def _end_job(code: int) -> NoReturn:
    """Leave a stopped job with exit status ``code``; in a worker process whose launcher died (the stop
    came from :func:`interrupt.stop_with_launcher`), end the process too: no launcher will send it more
    work or shut it down."""
    if interrupt.launcher_died():
        logging.shutdown()
        os._exit(code)
    raise SystemExit(code)


def _train_worker(specs: RunSpecs, run_dir: Path, resume: bool) -> None:
    """A torchrun rank > 0: train its shard of every batch; no tracking, evaluation or files."""
    with StopSignal() as stop:
        try:
            train(specs, run_dir, lambda metrics, step: None, lambda encoder: {}, stop.requested, resume)
        except TrainingInterrupted:
            raise SystemExit(128 + (stop.signum or signal.SIGINT)) from None


def _evaluate(cfg: DictConfig, specs: RunSpecs, run_dir: Path, tracker: Any) -> dict[str, float]:
    """mode=eval: score a model as given (``pooler=cls`` reads the model's own pooler, as SimCSE's evaluation).
    ``cfg`` is for the records (provenance, MLflow's dataset inputs), ``specs`` for the encoder and its evaluation."""
    device = resolve_device(specs.train.device)
    encoder = with_eval_pooler(encoder_from_config(specs.model, specs.pooler, training=False).to(device), specs)
    log.info("evaluating %s with pooler=%s", specs.model.name_or_path, encoder.pooler)
    with interrupt.interruptible():
        results = final_names(evaluate_encoder(encoder, specs, run_dir), specs.eval.sample_pairs)
    provenance = run_provenance(cfg, specs, encoder, str(device))
    tracker.log_results({**results, "pooler": encoder.pooler}, provenance=provenance)
    _log_mlflow_records(tracker, cfg, run_dir, provenance, None)
    _log_plots(tracker, run_dir)
    return results


def _train_and_evaluate(
    cfg: DictConfig, specs: RunSpecs, run_dir: Path, tracker: Any, stop_requested: Any, resume: bool
) -> dict[str, float]:
    """mode=train: train (:func:`cl_bench.train.loop.train`, given ``specs``), then the final evaluation of the
    selected weights. ``cfg`` is for the records (provenance, MLflow's dataset inputs and model)."""
    data_dir, sample = specs.paths.data_dir, specs.eval.sample_pairs

    def dev_eval(encoder: Any) -> dict[str, float]:
        # eval.sample_pairs (eval=iterate): the final evaluation's fixed sample here too, no full dev set encoded
        return evaluate_dev(encoder, data_dir, specs.train.select_metric, specs.eval.batch_size, sample_pairs=sample)

    method, state = train(specs, run_dir, tracker.log_metrics, dev_eval, stop_requested, resume,
                          final_eval_ratio=_final_eval_ratio(specs))
    training = {
        "train/steps": float(state.step),  # trained steps (a paper comparison shows them beside the paper's)
        select_name("best_step"): float(state.best_step),
        select_name(f"best_{specs.train.select_metric}", sample): state.best_score,
        "train/skipped_steps": float(state.skipped_steps),
        "train/stopped_early": float(state.stopped_early),
    }
    encoder = with_eval_pooler(method.eval_encoder(), specs)  # after best_model/ was saved: it keeps pooler.name
    pooler = str(getattr(encoder, "pooler", specs.pooler.name))
    log.info("final evaluation with pooler=%s", pooler)
    try:
        with interrupt.interruptible():
            results = final_names(evaluate_encoder(encoder, specs, run_dir), sample)
    except interrupt.EvaluationInterrupted as stopped:
        stopped.partial = {**training, **stopped.partial}
        raise
    results.update(training)

    device = str(encoder.device)  # where the evaluation encoder runs (QuickThoughts' pair of encoders has no parameters)
    provenance = run_provenance(cfg, specs, encoder, device, state.best_step)
    tracker.log_results({**results, "pooler": pooler}, state.step, provenance=provenance)
    remove_checkpoint(run_dir)  # finished: best_model/ is the run's one copy of its weights
    _log_mlflow_records(tracker, cfg, run_dir, provenance, state.step)
    _log_plots(tracker, run_dir)
    if RunDir(run_dir).best_model.is_dir():
        tracker.set_tags({"best_model": str(RunDir(run_dir).best_model)})
    return results


def _final_eval_ratio(specs: RunSpecs) -> float:
    """The final evaluation's encoding work in dev evaluations (distinct sentences), for the job's ETA."""
    own_tasks, _ = split_tasks(specs.eval.tasks)
    if not own_tasks:
        return 0.0
    evaluation = specs.eval
    try:
        final, dev = encoding_workload(specs.paths.data_dir, own_tasks, specs.train.select_metric,
                                       evaluation.align_uniform, evaluation.anisotropy, evaluation.align_uniform_split,
                                       evaluation.sample_pairs)
    except Exception as err:  # noqa: BLE001 (an ETA is not worth a run: the evaluation reports its own errors)
        log.debug("final evaluation not counted in the ETA: %s", err)
        return 0.0
    return final / max(dev, 1)


def _log_mlflow_records(tracker: Any, cfg: DictConfig, run_dir: Path, provenance: dict[str, Any],
                        step: int | None) -> None:
    """The run's data sets as MLflow dataset inputs, and (``logger.log_model``) its best checkpoint as an MLflow
    model at the final figures' ``step`` (:mod:`cl_bench.commands.mlflow_records`)."""
    if tracker.run_id is None:
        return
    mlflow_records.log_data(tracker, cfg, provenance)
    if step is not None and mlflow_records.logs_model(cfg, HydraConfig.get().mode == RunMode.MULTIRUN) \
            and RunDir(run_dir).best_model.is_dir():
        from cl_bench.commands.mlflow_pyfunc import log_pyfunc_encoder

        mlflow_records.log_best_model(run_dir, step, tracker.log_model, partial(tracker.log_model, log_fn=log_pyfunc_encoder))


def _log_plots(tracker: Any, run_dir: Path) -> None:
    for png in sorted(run_dir.glob("*.png")):
        tracker.log_artifact(png, "plots")
    if RunDir(run_dir).pair_scores.is_file():  # per-pair STS scores, for cl-bench-report --compare
        tracker.log_artifact(RunDir(run_dir).pair_scores)


