"""Hydra callback: every job of a sweep checked before the first starts; one MLflow parent run per
multirun, children are the jobs.

``on_multirun_start`` runs once in the launching process, before any job. It composes every job of
the grid and runs the same pre-flight checks as a single run (:func:`check_sweep`): one job that
fails them stops the sweep with one line before anything runs. It records which keys the jobs vary
(the children's run names show them) and then creates the MLflow
store and experiment (avoiding SQLite's table-creation race under parallel joblib jobs) and the
parent run, whose id is written to ``<sweep dir>/mlflow_parent_run_id.txt`` for the jobs.
The parent is closed at the end of the sweep (or at exit if a job's failure aborted Hydra) with a
summary of which children failed.
"""

from __future__ import annotations

import atexit
import json
import logging
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from cl_bench.config import ConfigError, preflight
from cl_bench.config.params import acting_params
from cl_bench.config.run_folder import check_sweep_folder
from cl_bench.reporting.report import ReportError, build_sweep_table, load_run_dirs, plot_sweep, sweep_summary
from cl_bench.tracking import ui_views
from cl_bench.tracking.metric_names import final_name, select_name
from cl_bench.tracking.mlflow_logger import (
    absolute_tracking_uri,
    default_tracking_uri,
    ensure_experiment,
    import_mlflow,
    ui_url,
)
from cl_bench.tracking.names import sweep_run_name
from cl_bench.tracking.params import KNOB_GROUPS, flatten, knob_params
from cl_bench.tracking.sync import close_parent_run
from cl_bench.utils import interrupt
from cl_bench.utils.overrides import override_parser
from cl_bench.utils.rundir import SweepDir

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
        sweep_dir = Path(config.hydra.sweep.dir)
        _check_folder(config)  # before anything is written: no sweep replaces another's jobs unseen
        varied = check_sweep(config, partly_inert := [])  # first: a rejected sweep leaves no folder
        interrupt.exit_at_once_on_signal()  # a signal to the launcher: the at_stop actions, then exit (parent KILLED)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        SweepDir(sweep_dir).varied_keys_file.write_text(json.dumps(varied))
        SweepDir(sweep_dir).partly_inert_file.write_text(json.dumps(partly_inert))
        enabled, uri, experiment_name = tracking_settings(config)
        if not enabled:
            return
        mlflow = import_mlflow()

        try:
            experiment_id = ensure_experiment(uri, experiment_name)
            client = mlflow.MlflowClient(tracking_uri=uri)
            overrides = " ".join(config.hydra.overrides.task)
            run = client.create_run(
                experiment_id,
                # keys by their last part, as the children's names show them, fitted to the runs table
                run_name=sweep_run_name(varied, sweep_dir.name),
                tags={"sweep": str(sweep_dir), "sweep.overrides": overrides[:5000], "sweep.parent": "true"},
            )
        except Exception as err:
            log.warning("MLflow unavailable at %s (%s): sweep jobs will log locally only", uri, err)
            return
        self.parent_run_id, self.tracking_uri = run.info.run_id, uri
        SweepDir(sweep_dir).parent_run_id.write_text(self.parent_run_id)
        # where the parent lives, for cl-bench-sync SWEEP_DIR after a killed launcher (it then ends the parent KILLED)
        SweepDir(sweep_dir).tracking.write_text(json.dumps(
            {"tracking_uri": absolute_tracking_uri(uri), "experiment_name": experiment_name}))
        atexit.register(self._close)  # Hydra exits early when a job failed: still close the parent
        interrupt.at_stop(lambda signum: self._close(killed=True))  # a signal to the launcher: the parent ends KILLED

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        # the folder Hydra is about to make (the same `now` as the job's: one config object): a signal before the
        # job's own handler marks it KILLED (cli.main)
        interrupt.note_job_dir(Path(str(config.hydra.run.dir)).absolute())

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        interrupt.note_job_dir(Path(config.hydra.runtime.output_dir))  # a sweep's job (on_run_start: single runs)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._close()
        self._summarise(Path(config.hydra.sweep.dir), str(config.get("logger", {}).get("log_model", "best")))

    def _summarise(self, sweep_dir: Path, log_model: str = "best") -> None:
        """End the sweep with its answer: the grid of headline figures (read from the jobs' run
        directories, so ``logger=none`` gets it too), the parent run, its MLflow URL and the report
        command; the parent run carries the table (its description and ``sweep_table.md``)."""
        url = compare = None
        if self.parent_run_id is not None:
            try:
                mlflow = import_mlflow()

                client = mlflow.MlflowClient(tracking_uri=self.tracking_uri)
                experiment_id = client.get_run(self.parent_run_id).info.experiment_id
                url, compare = save_sweep_views(client, self.tracking_uri, experiment_id, self.parent_run_id, sweep_dir)
            except Exception as err:  # the summary is printed whatever MLflow does
                log.warning("MLflow parent run %s unreadable: %s", self.parent_run_id, err)
        try:
            store = None if self.tracking_uri == default_tracking_uri() else self.tracking_uri  # the default needs no flag
            text = sweep_summary(sweep_dir, self.parent_run_id, store, url, compare)
        except (ReportError, ValueError, KeyError, OSError) as err:
            log.warning("no sweep summary: %s", err)
            return
        summary_file = sweep_dir / "sweep_table.md"
        summary_file.write_text(text + "\n")
        if self.parent_run_id is not None:
            try:
                client.set_tag(self.parent_run_id, "mlflow.note.content", f"```\n{text}\n```")
                client.log_artifact(self.parent_run_id, str(summary_file))
                log_sweep_outcome(client, self.parent_run_id, sweep_dir)
                log_sweep_plot(client, self.parent_run_id, sweep_dir)
            except Exception as err:
                log.warning("could not attach the sweep table to MLflow run %s: %s", self.parent_run_id, err)
            if log_model == "best":  # the jobs left it to the sweep (cl_bench.commands.mlflow_records.logs_model)
                log_best_job(self.tracking_uri, sweep_dir)
        print(f"\n{text}", flush=True)  # last: the sweep's answer ends its output, after MLflow's log lines

    def _close(self, killed: bool = False) -> None:
        if self._closed or self.parent_run_id is None:
            return
        self._closed = True
        try:
            close_parent_run(self.tracking_uri, self.parent_run_id, killed=killed)
        except Exception as err:
            log.warning("could not close MLflow parent run %s: %s", self.parent_run_id, err)


def _check_folder(config: DictConfig) -> None:
    """:func:`cl_bench.config.run_folder.check_sweep_folder`, its refusal as one line and exit 2."""
    import sys

    try:
        check_sweep_folder(config)
    except ConfigError as err:
        print(f"cl-bench: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


#: MLflow's longest param value (MLflow 3)
PARAM_VALUE_CHARS = 6000


def sweep_outcome(sweep_dir: Path) -> tuple[dict[str, str], dict[str, float], dict[str, str]]:
    """(params, metrics, tags) of a sweep's parent run, from its jobs' run directories.

    Params: each swept key with the values it took (``dropout: 0, 0.1, 0.3``), the best point's value of each
    (``best.dropout: 0.1``), the ranking metric and the number of points and jobs. Metrics: the best point's
    mean of the ranking metric under the children's own recorded name (``select/best_stsb_dev``, with its
    ``.sample<N>`` on a sample: the parent's row in the runs table reads as its best point), its std and 95%
    t-interval over seeds where there are two or more (``sweep/best_stsb_dev_std``, ``sweep/…_ci95_low``/``_high``),
    its mean ``sts/sts_avg``, and the finished and failed job counts (``sweep/finished_jobs``, ``sweep/failed_jobs``). The best point is the highest mean among
    the points with a finished job (the sweep's metrics, STS Spearman figures, are higher-is-better).
    """
    import math

    table = build_sweep_table(load_run_dirs(sweep_dir))
    points = table.points
    placed = points[points["runs"] > 0] if len(points) else points

    def shown(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "—"
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)

    params = {key: ", ".join(dict.fromkeys(shown(v) for v in points[key]))[:PARAM_VALUE_CHARS] for key in table.keys}
    params.update({"sweep.metric": table.metric, "sweep.points": str(len(points)), "sweep.jobs": str(len(table.runs))})
    statuses = table.runs["status"].fillna("RUNNING") if len(table.runs) else table.runs
    metrics: dict[str, float] = {"sweep/finished_jobs": float((statuses == "FINISHED").sum()),
                                 "sweep/failed_jobs": float((statuses == "FAILED").sum())}
    tags: dict[str, str] = {}
    if len(placed):
        best = placed.loc[placed["mean"].idxmax()]
        params.update({f"best.{key}": shown(best[key]) for key in table.keys})
        tags["sweep.best_point"] = str(best["point"])
        # the best point's mean under the children's recorded name (select/best_stsb_dev[.sampleN]: the parent's row
        # in the runs table reads as its best point); what only a sweep has goes to the sweep/ section

        done = table.runs[table.runs["point"] == best["point"]]
        sample = next((int(v) for v in done["sample"] if v == v), None) if "sample" in done else None
        final_sample = next((int(v) for v in done["final_sample"] if v == v), None) if "final_sample" in done else None
        named = select_name(table.metric, sample) if table.metric.startswith("best_") else final_name(table.metric, sample)
        candidates = {named: best["mean"], f"sweep/{table.metric}_std": best["std"],
                      f"sweep/{table.metric}_ci95_low": best["ci95_low"],
                      f"sweep/{table.metric}_ci95_high": best["ci95_high"],
                      final_name("sts_avg", final_sample): best["sts_avg"], "sweep/best_point_runs": best["runs"]}
        metrics.update({k: float(v) for k, v in candidates.items() if v is not None and math.isfinite(float(v))})
    return params, metrics, tags


def log_sweep_outcome(client: Any, parent_run_id: str, sweep_dir: Path) -> None:
    """Log :func:`sweep_outcome` to the parent run: the MLflow page under its grid then shows the sweep's
    parameters and its best point's metrics, not "Metrics (0) / Parameters (0)"."""
    from mlflow.entities import Metric, Param, RunTag

    params, metrics, tags = sweep_outcome(sweep_dir)
    now = int(time.time() * 1000)
    client.log_batch(parent_run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                     params=[Param(k, v) for k, v in params.items()], tags=[RunTag(k, v) for k, v in tags.items()])


def save_sweep_views(client: Any, tracking_uri: str, experiment_id: str, parent_run_id: str,
                     sweep_dir: Path) -> tuple[str, str | None]:
    """Save the sweep's two views of MLflow's runs page (:mod:`cl_bench.tracking.ui_views`) and return their URLs:
    (the runs table, the chart view line or None for a single child).

    Both list the sweep's children; the table shows the swept keys, then the headline figures, sorted by the figure
    the sweep ranks its points on (best first); the chart view opens on the swept keys against the headline figures
    (a parallel-coordinates plot, a bar chart per figure). The views are saved on the experiment under the keys
    ``sweep-<parent run id>`` and ``sweep-<parent run id>-charts``, and listed by name in the UI's view menu.
    """
    children = client.search_runs([experiment_id], ui_views.children_filter(parent_run_id), max_results=1000)
    logged = {k for run in children for k in run.data.metrics}
    metric = ui_views.logged_name(build_sweep_table(load_run_dirs(sweep_dir)).metric, logged)
    metrics = ui_views.headline_columns(logged, first=metric)
    params = [k for k in SweepDir(sweep_dir).varied_keys() or [] if any(k in run.data.params for run in children)]
    search = ui_views.children_filter(parent_run_id)
    table_key = ui_views.save_view(client, experiment_id, f"{sweep_dir.name}: runs",
                                   ui_views.runs_view_state(metrics, params, metric, search), f"sweep-{parent_run_id}")
    url = f"{ui_url(tracking_uri, experiment_id)}&{ui_views.view_query(table_key)}"
    if len(children) < 2:
        return url, None
    charts_key = ui_views.save_view(client, experiment_id, f"{sweep_dir.name}: charts",
                                    ui_views.charts_view_state(metrics, params, metric, search),
                                    f"sweep-{parent_run_id}-charts")
    charts = f"{ui_url(tracking_uri, experiment_id)}&{ui_views.view_query(charts_key, charts=True)}"
    return url, f"MLflow charts ({len(children)} runs, swept keys against the headline figures): {charts}"


def log_sweep_plot(client: Any, parent_run_id: str, sweep_dir: Path) -> None:
    """Attach the sweep's table (``sweep.csv``: per point, mean ± std over seeds) and its plot (``sweep.png``, as
    ``cl-bench-report`` draws it) to the parent run: the comparison one click from the experiment page."""
    table = build_sweep_table(load_run_dirs(sweep_dir))
    csv_path = sweep_dir / "sweep.csv"
    table.points.to_csv(csv_path.with_name("sweep.csv.tmp"), index=False)
    csv_path.with_name("sweep.csv.tmp").replace(csv_path)
    client.log_artifact(parent_run_id, str(csv_path))
    client.log_artifact(parent_run_id, str(plot_sweep(table, sweep_dir / "sweep.png")))


def best_job(sweep_dir: Path) -> tuple[str, Path, int] | None:
    """(run id, run dir, final step) of the sweep's best job: in the best point (:func:`sweep_outcome`'s), the
    finished run with the highest ranking figure; None when no job finished with it."""
    runs = load_run_dirs(sweep_dir)
    table = build_sweep_table(runs)
    placed = table.points[table.points["runs"] > 0] if len(table.points) else table.points
    if not len(placed):
        return None
    point = placed.loc[placed["mean"].idxmax(), "point"]
    finished = table.runs[(table.runs["point"] == point) & (table.runs["status"] == "FINISHED")
                          & table.runs["value"].notna()]
    if not len(finished):
        return None
    run = runs[runs["run_id"] == finished.loc[finished["value"].idxmax(), "run_id"]].iloc[0]
    return str(run["run_id"]), Path(run["tags.run_dir"]), int(run.get("metrics.steps", 0) or 0)


def log_best_job(tracking_uri: str, sweep_dir: Path) -> str | None:
    """``logger.log_model=best``: the best job's checkpoint as an MLflow model, under that job's run; its URI."""
    from cl_bench.commands.mlflow_records import log_best_job_model

    found = best_job(sweep_dir)
    if found is None or not (found[1] / "best_model").is_dir():
        return None
    return log_best_job_model(tracking_uri, found[1], found[0], found[2])


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """Every job's overrides, as Hydra's basic sweeper will launch them (preset params + command line)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
    parsed = override_parser().parse_overrides([*params, *config.hydra.overrides.task])
    return [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def varied_keys(jobs: list[list[str]]) -> list[str]:
    """The keys whose values differ among the jobs, in command-line order, as Hydra's ``OverridesParser``
    reads each job's overrides (a config group by its name, ``+``/``~`` dropped)."""
    values: dict[str, set[str]] = {}
    for job in jobs:
        for override in override_parser().parse_overrides(job):
            value = "" if override.is_delete() else override.get_value_element_as_str()
            values.setdefault(override.key_or_group, set()).add(value)
    return [key for key, seen in values.items() if len(seen) > 1]


def check_sweep(config: DictConfig, partly_inert: list[str] | None = None) -> list[str]:
    """Compose every job of the sweep and run the pre-flight checks on each; returns the varied keys.

    ``partly_inert`` (when given) receives the params that act in some jobs and not in others (e.g.
    ``method.fixed_dropout_mask`` in a sweep over ``dropout=0,0.1``): the jobs where they cannot act
    log them as ``n/a``, so every child has the same params and the report does not take a key for an
    axis because some runs lack it.

    Raises:
        SystemExit(2): after printing ``cl-bench: error: job N (overrides): <key>: <why>``.
    """
    import sys

    from hydra.core.global_hydra import GlobalHydra

    if config.hydra.sweeper.get("_target_", "").rsplit(".", 1)[-1] != "BasicSweeper":
        log.warning("sweeper %s: jobs are checked one by one as they start", config.hydra.sweeper.get("_target_"))
        return []
    jobs = sweep_jobs(config)
    loader = GlobalHydra.instance().config_loader()
    acting: list[set[str]] = []
    everything: list[set[str]] = []  # every job's keys, acting or not
    for number, job in enumerate(jobs):
        try:
            try:
                job_config = loader.load_sweep_config(config, job)
            except Exception as err:  # Hydra's composition error, e.g. a key this job's loss lacks
                first = str(err).strip().splitlines()[0]
                match = re.match(r"Could not override '([^']+)'", first)
                raise ConfigError(
                    f"{match.group(1)}: not a key of this job's config (no such key in the option it chose)"
                    if match else first
                ) from None
            choices = dict(job_config.hydra.runtime.choices)
            with open_dict(job_config):
                del job_config["hydra"]
            specs = preflight(job_config, job)
            if partly_inert is not None:
                _collect_keys(job_config, choices, specs.inert, acting, everything)
        except ConfigError as err:
            print(f"cl-bench: error: job {number} ({' '.join(job)}): {err}", file=sys.stderr)
            raise SystemExit(2) from None
    if partly_inert is not None and acting:
        sometimes = set.union(*acting) & set.intersection(*everything)  # a key of every job, acting in one
        partly_inert[:] = sorted(k for k in sometimes if any(k not in keys for keys in acting))
    return varied_keys(jobs)


def _collect_keys(job_config: DictConfig, choices: dict[str, Any], inert: Mapping[str, str], acting: list[set[str]],
                  everything: list[set[str]]) -> None:
    """Add one job's params and all its keys (for the partly inert keys of :func:`check_sweep`); ``choices``: the
    job's config-group choices (Hydra's ``runtime.choices``), the params named after a group; ``inert``: the keys its
    preflight found inert.

    The launching process has no job's Hydra runtime: ``paths.output_dir`` (``${hydra:...}``) is
    replaced by a placeholder, which changes no key. A job that still does not resolve adds nothing.
    """
    resolvable = job_config.copy()
    with open_dict(resolvable):
        if "paths" in resolvable and "output_dir" in resolvable.paths:
            resolvable.paths.output_dir = "<job dir>"
    try:
        keys = set(knob_params(acting_params(resolvable, inert), choices))
        every = set(flatten(OmegaConf.to_container(resolvable, resolve=True)))
        every |= {g for g in KNOB_GROUPS if choices.get(g) is not None}  # a group's param, acting or not
    except Exception as err:  # noqa: BLE001 (a summary aid: the sweep goes on without it)
        log.warning("could not list the acting keys of a job (%s): every job logs its own", err)
        return
    acting.append(keys)
    everything.append(every)
