"""``cl-bench-report``: any sweep's MLflow runs as tables and plots, with the papers' tables where they apply.

    cl-bench -m dropout=0,0.1 loss.tau=0.05,0.1 seed=1,2          # any sweep
    cl-bench-report --parent-run 3f2a...                           # its report (one sweep)
    cl-bench-report --experiment ablation_dropout                  # every run of an MLflow experiment

The report always holds the sweep itself: the swept keys are found as the params whose values
differ among the runs (seed aside: the runs of a point are its seeds; keys that split the runs the
same way, like ``dropout`` and ``model.dropout``, count once), and ``sweep.csv`` / ``sweep.png`` give
the compared metric per point, mean ± std over seeds — a grid in ``report.md`` for two keys. For
every ablation table of :mod:`cl_bench.reporting.reference_results` the runs belong to (their ``experiment``
tag, or ``--ablation``), it adds the paper's table: reproduced figure, the paper's and the
difference, ``<table>.csv`` and ``<table>.png``. Every run of the sweep is a row of ``runs.csv`` and a
point of ``align_uniform.png`` (SimCSE's Figure 2 axes); a run that could not be placed (failed,
no metric) is listed in ``report.md`` with the reason. The files go to ``--out`` and are attached to
the sweep's parent run(s) in MLflow under ``report/``. Runs are read with ``mlflow.search_runs``.
"""

from __future__ import annotations

import logging
import math
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cl_bench.eval.pair_scores import load_pair_scores
from cl_bench.reporting.reference_results import (
    AblationSpec,
    ReferenceDataError,
    load_ablations,
    parse_value,
    run_value,
    specs_for,
    values_equal,
)
from cl_bench.reporting.report_args import DEFAULT_RESAMPLES, SWEEP_METRICS, build_parser
from cl_bench.reporting.significance import (
    EVAL_SETTINGS,
    FULL,
    METRIC_TASKS,
    ZERO_VARIANCE,
    against_reference,
    compare,
    compare_notes,
    mark,
    markdown_compare,
    side_protocol,
)
from cl_bench.tracking.metric_names import (
    SELECT,
    final_name,
    flat_view,
    parse_name,
    sample_of,
    select_name,
    upgrade_record,
)
from cl_bench.tracking.mlflow_logger import default_tracking_uri, local_store
from cl_bench.tracking.names import PROVENANCE_FIELDS, PROVENANCE_TAG_PREFIX
from cl_bench.utils.conf_dir import CONF_DIR
from cl_bench.utils.overrides import override_parser
from cl_bench.utils.rundir import RunDir

log = logging.getLogger("cl_bench.reporting.report")

PARENT_TAG = "tags.mlflow.parentRunId"
RUN_NAME_TAG = "tags.mlflow.runName"
EXTRA_METRICS = ("sts_avg", "align", "uniform")


class ReportError(RuntimeError):
    """Nothing to report (no such experiment/run, no matching table); the message says what to pass."""


@dataclass
class AblationTable:
    """One ablation's result: a row per point, and the runs behind it.

    Attributes:
        spec: the paper's table.
        points: one row per point (``point, runs, mean, std, paper, difference, sts_avg, …``).
        runs: the finished runs used, with their ``point`` label and ``value`` (the compared metric).
    """

    spec: AblationSpec
    points: pd.DataFrame
    runs: pd.DataFrame


# ------------------------------------------------------------------------------------------------
# Reading MLflow
# ------------------------------------------------------------------------------------------------
def load_runs(tracking_uri: str, experiment: str | None = None, parent_run_id: str | None = None) -> pd.DataFrame:
    """The runs of an experiment (sweep parent runs excluded) or the children of one sweep.

    Args:
        tracking_uri: MLflow store or server.
        experiment: MLflow experiment name.
        parent_run_id: the sweep's parent run (takes precedence over ``experiment``).

    Returns:
        ``mlflow.search_runs``'s DataFrame (``run_id``, ``status``, ``params.*``, ``metrics.*``, ``tags.*``).

    Raises:
        ReportError: unknown experiment or run, or no runs.
    """
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    if parent_run_id:
        try:
            parent = client.get_run(parent_run_id)
        except Exception as err:
            raise ReportError(f"--parent-run: no run {parent_run_id} at {tracking_uri}") from err
        runs = mlflow.search_runs(
            experiment_ids=[parent.info.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'",
            max_results=50000,
        )
        where = f"sweep {parent_run_id}"
    else:
        found = client.get_experiment_by_name(experiment or "")
        if found is None:
            names = sorted(e.name for e in client.search_experiments())
            raise ReportError(f"--experiment: no MLflow experiment '{experiment}' at {tracking_uri}; have: {', '.join(names)}")
        runs = mlflow.search_runs(experiment_ids=[found.experiment_id], max_results=50000)
        if "tags.sweep.parent" in runs:
            runs = runs[runs["tags.sweep.parent"] != "true"]
        where = f"experiment {experiment}"
    if runs.empty:
        raise ReportError(f"no runs in {where} at {tracking_uri}")
    runs = read_metric_names(runs.reset_index(drop=True))
    if "tags.run_dir" in runs:  # older runs: their overrides from the job folders, where those are on this machine
        recorded = runs[JOB_OVERRIDES_TAG] if JOB_OVERRIDES_TAG in runs else pd.Series([None] * len(runs))
        runs[JOB_OVERRIDES_TAG] = [value if isinstance(value, str) else
                                   (hydra_job_overrides(folder) if isinstance(folder, str) else None)
                                   for value, folder in zip(recorded, runs["tags.run_dir"], strict=True)]
    return runs


#: the columns :func:`read_metric_names` adds: the sample (pairs per split) of a run's final figures and of its
#: checkpoint-selection figure (NaN: the full protocol)
FINAL_SAMPLE, SELECT_SAMPLE = "sample.final", "sample.select"


def read_metric_names(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs logged under any naming (``sts/stsb.sample300``, or the old flat ``stsb`` beside ``eval_sample_pairs``)
    read the same way: each run's ``metrics.*`` under their recorded names (:func:`~cl_bench.tracking.metric_names.upgrade_record`),
    plus the flat view the tables compare by key (``metrics.stsb``, ``metrics.best_stsb_dev``: the final figure
    and the checkpoint-selection figure, whatever their sample, :func:`~cl_bench.tracking.metric_names.flat_view`)
    and the columns :data:`FINAL_SAMPLE` / :data:`SELECT_SAMPLE`, which the tables' headings read."""
    columns = [c for c in runs.columns if c.startswith("metrics.")]
    rows = []
    for record in runs[columns].to_dict("records"):
        metrics = {c.removeprefix("metrics."): v for c, v in record.items() if not _missing(v)}
        named = upgrade_record(metrics)
        rows.append({**{f"metrics.{k}": v for k, v in named.items()},
                     **{f"metrics.{k}": v for k, v in flat_view(named).items()},
                     FINAL_SAMPLE: sample_of(named) or math.nan, SELECT_SAMPLE: sample_of(named, SELECT) or math.nan})
    added = pd.DataFrame(rows, index=runs.index)
    return pd.concat([runs.drop(columns=[c for c in added.columns if c in runs.columns]), added], axis=1)


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------
def _first_metric(run: dict[str, Any], metrics: Sequence[str]) -> float:
    for name in metrics:
        value = run.get(f"metrics.{name}")
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return float(value)
    return math.nan


def _mean_std(values: pd.Series) -> tuple[float, float]:
    values = values.dropna()
    if values.empty:
        return math.nan, math.nan
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else math.nan


#: the confidence level of the intervals over seeds
CONFIDENCE = 0.95


def t_interval(values: Sequence[float] | pd.Series, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student-t confidence interval of the mean over seeds (``scipy.stats.t.interval``, n - 1 degrees of
    freedom, the sample std): the seeds are treated as independent draws. NaNs when n < 2."""
    from scipy import stats

    clean = pd.Series(values, dtype=float).dropna()
    if len(clean) < 2:
        return math.nan, math.nan
    sem = float(clean.std(ddof=1)) / math.sqrt(len(clean))
    if sem == 0.0:  # identical replicates: the interval is the point
        return float(clean.mean()), float(clean.mean())
    low, high = stats.t.interval(confidence, len(clean) - 1, loc=float(clean.mean()), scale=sem)
    return float(low), float(high)


def _ci_columns(values: pd.Series) -> dict[str, float]:
    low, high = t_interval(values)
    return {"n": int(values.notna().sum()), "ci95_low": low, "ci95_high": high}


def _ci(low: float, high: float) -> str:
    return "—" if math.isnan(low) else f"[{low:.2f}, {high:.2f}]"


def build_table(runs: pd.DataFrame, spec: AblationSpec, any_experiment: bool = False) -> AblationTable | None:
    """The ablation table of ``spec`` from the finished runs that belong to it (None: none do).

    Args:
        runs: ``mlflow.search_runs`` rows.
        spec: the paper's table.
        any_experiment: take runs whatever their ``experiment`` tag (the table was named explicitly).
    """
    used = []
    for run in runs.to_dict("records"):
        if run.get("status") != "FINISHED":
            continue
        if not any_experiment and run.get("tags.experiment") not in spec.experiments:
            continue
        if not spec.selects(run):
            continue
        point = spec.point_of(run)
        used.append({
            **{f"setting.{name}": _run_setting(run, name) for name in SETTING_KEYS},
            "run_id": run["run_id"],
            "run_name": run.get(RUN_NAME_TAG, ""),
            "parent_run_id": run.get(PARENT_TAG),
            "seed": run.get("params.seed"),
            "point": point.label if point else spec.other_label(run),
            "value": _first_metric(run, spec.metrics),
            **{name: _first_metric(run, (name,)) for name in EXTRA_METRICS},
            "sample": run.get(SELECT_SAMPLE if spec.metrics[0].startswith("best_") else FINAL_SAMPLE, math.nan),
        })
    if not used:
        return None
    used_runs = pd.DataFrame(used)
    order = [p.label for p in spec.points] + sorted(set(used_runs["point"]) - {p.label for p in spec.points})
    paper = {p.label: p.paper for p in spec.points}
    rows = []
    for label in order:
        group = used_runs[used_runs["point"] == label]
        mean, std = _mean_std(_by_seed(group, "value"))
        sts_mean, sts_std = _mean_std(_by_seed(group, "sts_avg"))
        figure = paper.get(label)
        rows.append({
            "point": label,
            "runs": len(group),
            "seeds": len(_by_seed(group, "value")),
            "mean": mean,
            "std": std,
            **_ci_columns(group["value"]),
            "paper": figure if figure is not None else math.nan,
            "difference": mean - figure if figure is not None and not math.isnan(mean) else math.nan,
            "sts_avg": sts_mean,
            "sts_avg_std": sts_std,
            "align": _mean_std(group["align"])[0],
            "uniform": _mean_std(group["uniform"])[0],
        })
    return AblationTable(spec, pd.DataFrame(rows), used_runs)


def _fmt(value: float, digits: int = 2) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _mean_pm(mean: float, std: float) -> str:
    if math.isnan(mean):
        return "—"
    return f"{mean:.2f} ± {std:.2f}" if not math.isnan(std) else f"{mean:.2f}"


def markdown_table(table: AblationTable) -> str:
    """The table as markdown: point, runs, reproduced (mean ± std), paper, difference, STS avg."""
    frame = table.points
    shown = pd.DataFrame({
        "point": frame["point"],
        "runs": frame["runs"],
        f"reproduced ({figure_label(table.spec.metrics[0], table.runs['sample'])})":
            [_mean_pm(m, s) for m, s in zip(frame["mean"], frame["std"], strict=True)],
        "seeds n": frame["n"],
        "95% CI (t, over seeds)": [_ci(lo, hi) for lo, hi in zip(frame["ci95_low"], frame["ci95_high"], strict=True)],
        "paper": [_fmt(v, 1) for v in frame["paper"]],
        "difference": [("—" if math.isnan(v) else f"{v:+.2f}") for v in frame["difference"]],
        "STS avg": [_mean_pm(m, s) for m, s in zip(frame["sts_avg"], frame["sts_avg_std"], strict=True)],
    })
    return shown.to_markdown(index=False, colalign=("left", *["right"] * (len(shown.columns) - 1)))


# ------------------------------------------------------------------------------------------------
# The sweep itself
# ------------------------------------------------------------------------------------------------
#: Metrics a sweep table compares, the first one its runs have wins (``--metric`` picks another).
#: Params that tell replicates apart, not points.
REPLICATE_KEYS = ("seed",)
#: Params that differ per job without being a knob (where it wrote its files, how it was logged).
NOT_KNOBS = ("paths.", "hydra.", "logger.", "train.resume", "train.device", "train.num_threads")
OVERRIDES_TAG = "tags.overrides"


#: the MLflow tag (and tags.json key) holding a job's own overrides, the list Hydra passed it (JSON)
JOB_OVERRIDES_TAG = "tags.overrides.task"
#: swept keys that are replicates, not axes (``seeds=N`` expands to ``seed=S,…``)
REPLICATE_OVERRIDES = ("seed", "seeds")
#: config groups whose options are a preset's grid points (conf/experiment/points/): bundles of settings, not
#: one key; a sweep over them is tabled by the params they set (``dropout``, ``method.fixed_dropout_mask``)
POINT_GROUPS = ("experiment/",)


@dataclass
class SweepTable:
    """The sweep over its own swept keys.

    Attributes:
        keys: the swept keys, in the order the tables show them: the keys the user swept, spelt as typed
            (``method``, ``dropout``) when the runs recorded their overrides, else the params that differ.
        metric: the compared metric.
        points: one row per combination of the keys' values (``<keys…>, point, runs, mean, std, …``).
        runs: every run of the sweep (``run_id, run_name, status, seed, <keys…>, point, value, …``).
        consequences: params that differ among the runs only because a swept key changed them (a method's
            own ``loss.tau``), each with its values per point: listed under the table, never axes.
        replicates: the swept replicate keys (``seed``): their values are the replicates of each point.
    """

    keys: list[str]
    metric: str
    points: pd.DataFrame
    runs: pd.DataFrame
    consequences: dict[str, str] | None = None
    replicates: list[str] | None = None

    def title(self) -> str:
        """``Sweep over method × dropout``; a seeds-only sweep: ``Replicates of one setting: 8 seeds``."""
        if self.keys:
            return f"Sweep over {' × '.join(self.keys)}"
        seeds = sorted({s for s in self.runs["seed"] if not _missing(s)}, key=_sort_key)
        if len(seeds) > 1:
            return f"Replicates of one setting: {len(seeds)} seeds ({', '.join(_fmt_value(s) for s in seeds)})"
        return "One setting (no key swept)"


def _param(runs: pd.DataFrame, key: str) -> pd.Series:
    column = f"params.{key}"
    values = runs[column] if column in runs else pd.Series([None] * len(runs), index=runs.index)
    return values.map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else parse_value(v))


def _sort_key(value: Any) -> tuple[int, Any]:
    """Numbers in numeric order, then text, then missing values."""
    if isinstance(value, bool) or value is None:
        return (2 if value is None else 1, str(value))
    if isinstance(value, (int, float)):
        return (0, float(value))
    return (1, str(value))


def _fmt_value(value: Any) -> str:
    if _missing(value):  # None, or pandas' NaN for a key a run does not have
        return "—"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _value_rank(values: pd.Series) -> Any:
    """A sort key for one swept key's values: numbers in numeric order, then names in the order the runs
    (the jobs, in command-line order) first have them: ``method=simcse,sg_opt`` keeps simcse first."""
    first_seen = {repr(v): i for i, v in reversed(list(enumerate(values)))}
    return lambda v: (0, float(v), 0) if _sort_key(v)[0] == 0 else (_sort_key(v)[0], 0.0, first_seen.get(repr(v), 0))


def swept_keys(runs: pd.DataFrame) -> list[str]:
    """The params whose values differ among the runs: what the sweep varied.

    Seeds are replicates, not points; run-location params (``paths.*``, ``logger.*``…) are not
    knobs. Keys that split the runs identically (``dropout`` and ``model.dropout``; a swept group's
    ``_target_``, ``name`` and its own keys) count once: the one named in the runs' overrides,
    else the shortest name.
    """
    overridden = {
        item.split("=", 1)[0].lstrip("+~")
        for text in runs.get(OVERRIDES_TAG, pd.Series(dtype=object)).dropna()
        for item in str(text).split(",") if "=" in item
    }
    by_partition: dict[tuple[int, ...], list[str]] = {}
    for column in runs.columns:
        key = column[len("params."):] if column.startswith("params.") else None
        if key is None or key in REPLICATE_KEYS or key.startswith(NOT_KNOBS):
            continue
        raw = _param(runs, key)
        values = raw.map(lambda v: repr(v))
        if values.nunique() < 2:
            continue
        acting = raw[raw.map(lambda v: v is not None and v != "n/a")]
        if acting.map(repr).nunique() < 2 and key not in overridden:
            continue  # the same wherever it acted (absent or n/a in the runs where it could not): no axis
        partition = tuple(pd.factorize(values)[0])
        by_partition.setdefault(partition, []).append(key)
    chosen = [min(keys, key=lambda k: (k not in overridden, k.count("."), len(k), k)) for keys in by_partition.values()]
    return sorted(chosen, key=lambda k: (k not in overridden, k))


def build_sweep_table(runs: pd.DataFrame, metric: str | None = None) -> SweepTable:
    """The sweep table: every run with its point (its values of the swept keys), and per point mean ± std.

    Args:
        runs: ``mlflow.search_runs`` rows (all the sweep's runs, whatever their status).
        metric: the compared metric (default: the first of :data:`SWEEP_METRICS` a finished run has).
    """
    typed = typed_sweep(runs)
    consequences: dict[str, str] = {}
    replicates: list[str] = []
    if typed is not None:  # the keys the user swept, as Hydra parsed the overrides
        swept, per_run = typed
        keys = [k for k in swept if k not in REPLICATE_OVERRIDES]
        replicates = [k for k in swept if k in REPLICATE_OVERRIDES]
        values = {key: pd.Series([parse_value(o.get(key)) for o in per_run], index=runs.index) for key in keys}
    else:  # runs that did not record their overrides: the params whose values differ
        keys = swept_keys(runs)
        values = {key: _param(runs, key) for key in keys}
    finished = runs["status"] == "FINISHED"
    if metric is None:
        metric = next((m for m in SWEEP_METRICS if f"metrics.{m}" in runs and runs.loc[finished, f"metrics.{m}"].notna().any()),
                      SWEEP_METRICS[0])
    records = []
    for index, run in zip(runs.index, runs.to_dict("records"), strict=True):
        point = {key: values[key][index] for key in keys}
        records.append({
            "run_id": run["run_id"],
            "run_name": run.get(RUN_NAME_TAG) or run["run_id"],
            "status": run.get("status"),
            "parent_run_id": run.get(PARENT_TAG),
            "seed": parse_value(run.get("params.seed")),
            **point,
            "point": ", ".join(f"{k}={_fmt_value(v)}" for k, v in point.items()) or "all runs",
            "value": _first_metric(run, (metric,)),
            **{name: _first_metric(run, (name,)) for name in EXTRA_METRICS},
            # the sample of the figures beside each value (the headings say it): selection's or the final one's
            "sample": run.get(SELECT_SAMPLE if metric.startswith("best_") else FINAL_SAMPLE, math.nan),
            "final_sample": run.get(FINAL_SAMPLE, math.nan),
            "run_dir": run.get("tags.run_dir"),
        })
    ranks = {key: _value_rank(values[key]) for key in keys}
    records.sort(key=lambda r: ([ranks[k](r[k]) for k in keys], _sort_key(r["seed"]), str(r["run_name"])))
    table_runs = pd.DataFrame(records)
    placed = table_runs[(table_runs["status"] == "FINISHED") & table_runs["value"].notna()]
    rows = []
    combos = sorted({tuple(r[k] for k in keys) for r in records},
                    key=lambda c: [ranks[k](v) for k, v in zip(keys, c, strict=True)])
    for combo in combos:
        group = placed[[all(_same(r[k], v) for k, v in zip(keys, combo, strict=True)) for r in placed.to_dict("records")]]
        mean, std = _mean_std(group["value"])
        sts_mean, sts_std = _mean_std(group["sts_avg"])
        rows.append({
            **dict(zip(keys, combo, strict=True)),
            "point": ", ".join(f"{k}={_fmt_value(v)}" for k, v in zip(keys, combo, strict=True)) or "all runs",
            "runs": len(group), "mean": mean, "std": std, **_ci_columns(group["value"]),
            "sts_avg": sts_mean, "sts_avg_std": sts_std,
            "align": _mean_std(group["align"])[0], "uniform": _mean_std(group["uniform"])[0],
        })
    if typed is not None:
        consequences = consequent_params(runs, keys, values)
    return SweepTable(keys, metric, pd.DataFrame(rows), table_runs, consequences, replicates)


def hydra_job_overrides(job_dir: str | Path) -> str | None:
    """The JSON list of a job's overrides from the ``.hydra/overrides.yaml`` Hydra wrote in its folder (runs
    logged before cl-bench recorded the :data:`JOB_OVERRIDES_TAG` tag); None when there is none."""
    import json

    import yaml

    path = Path(job_dir) / ".hydra" / "overrides.yaml"
    try:
        return json.dumps(yaml.safe_load(path.read_text()) or []) if path.is_file() else None
    except (OSError, yaml.YAMLError):
        return None


def job_overrides(value: Any) -> dict[str, str] | None:
    """A job's overrides (the JSON list of :data:`JOB_OVERRIDES_TAG`) parsed by Hydra's own
    ``OverridesParser``: key as typed (a config group by its name, ``+``/``~`` dropped) -> value as typed.
    None when the run recorded none."""
    import json

    if _missing(value) or value == "":
        return None
    items = json.loads(value) if isinstance(value, str) else list(value)
    parsed = {}
    for override in override_parser().parse_overrides([str(item) for item in items]):
        if override.is_delete():
            continue
        key = override.key_or_group + (f"@{override.package}" if override.package else "")
        parsed[key] = override.get_value_element_as_str()
    return parsed


def typed_sweep(runs: pd.DataFrame) -> tuple[list[str], list[dict[str, str]]] | None:
    """The keys the user swept, spelt as typed and in command-line order, and each run's overrides.

    A key is swept when its value (as Hydra parsed each job's overrides) differs among the runs; the
    run-location keys (``hydra.*``, ``paths.*``…) never are. None when some run recorded no overrides
    (runs logged before cl-bench recorded them: :func:`swept_keys` decides from the params then).
    """
    if JOB_OVERRIDES_TAG not in runs:
        return None
    per_run = [job_overrides(v) for v in runs[JOB_OVERRIDES_TAG]]
    if any(o is None for o in per_run):
        return None
    order = list(dict.fromkeys(k for o in per_run for k in o))  # type: ignore[union-attr]
    swept = [k for k in order if not k.startswith(NOT_KNOBS)
             and len({repr(parse_value(o.get(k))) for o in per_run}) > 1]  # type: ignore[union-attr]
    if any(k.startswith(POINT_GROUPS) for k in swept):
        return None  # a preset's grid points each set several keys (dropout and the fixed mask): the params name them
    return swept, per_run  # type: ignore[return-value]


def consequent_params(runs: pd.DataFrame, keys: Sequence[str], values: dict[str, pd.Series]) -> dict[str, str]:
    """The params that differ among the runs without being swept (``loss.tau`` when ``method`` is swept and the
    methods' defaults differ), each with ``value (points)`` text; a swept key's own params (``method.name``,
    ``model.dropout`` equal to ``dropout``) and the replicates' are left out."""
    found: dict[str, str] = {}
    for column in runs.columns:
        name = column[len("params."):] if column.startswith("params.") else None
        if name is None or name in REPLICATE_OVERRIDES or name.startswith(NOT_KNOBS):
            continue
        if any(name == k or name.startswith(f"{k}.") or name.startswith(f"{k.split('/')[0]}.") for k in keys):
            continue  # the swept group's own keys
        raw = _param(runs, name)
        if raw.map(repr).nunique() < 2:
            continue
        if any(all(_same(raw[i], values[k][i]) for i in runs.index) for k in keys):
            continue  # the swept value itself under another name (model.dropout for dropout)
        acting = raw[raw.map(lambda v: v is not None and v != "n/a")]
        if acting.map(repr).nunique() < 2:
            continue  # the same wherever it acted
        # described by the one swept key that determines it when there is one (method=simcse), else by the points
        deciding = next((k for k in keys if all(len({repr(raw[i]) for i in runs.index if _same(values[k][i], v)}) == 1
                                                for v in values[k])), None)
        shown = [deciding] if deciding else list(keys)
        by_value: dict[str, list[str]] = {}
        for i in runs.index:
            where = ", ".join(f"{k}={_fmt_value(values[k][i])}" for k in shown)
            seen = by_value.setdefault(_fmt_value(raw[i]), [])
            if where not in seen:
                seen.append(where)
        # a key a run's config lacks (loss.objective where method=simcse has none) is "—" with that reason, never nan
        text = "; ".join(f"{v} ({'; '.join(points) or 'all runs'}" + (": no such key in that config)" if v == "—" else ")")
                         for v, points in by_value.items())
        point_of = [tuple(repr(values[k][i]) for k in keys) for i in runs.index]
        within = len(set(zip(point_of, raw.map(repr), strict=True))) > len(set(point_of))
        found[name] = text + (" — also varies within a point" if within else "")
    return found


def sweep_notes(table: SweepTable) -> list[str]:
    """The lines under a sweep table: what the replicates are, and the keys that changed with the swept ones."""
    lines = []
    if table.keys and table.replicates:
        lines.append(f"Replicates: {', '.join(table.replicates)} (each point's runs; n counts them).")
    if table.consequences:
        lines.append("Not axes: params that differ among the runs because a swept key set them (e.g. a method's own defaults):")
        lines += [f"  {name}: {text}" for name, text in table.consequences.items()]
    return lines


def _missing(value: Any) -> bool:
    """None, or the NaN pandas puts in its place in a column (a key a run did not set)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _same(a: Any, b: Any) -> bool:
    return (_missing(a) and _missing(b)) or (not _missing(a) and not _missing(b) and values_equal(a, b))


def protocol_of(samples: Any) -> str:
    """``full`` or ``sample of N pairs`` (``a | b`` when runs differ; ``—`` without runs) of a runs' sample column."""
    seen = list(dict.fromkeys("full" if _missing(v) else f"sample of {int(v)} pairs" for v in samples))
    return " | ".join(seen) or "—"


def figure_label(metric: str, samples: Any = ()) -> str:
    """What a flat sweep metric holds, for a heading: its split, which evaluation, and the protocol of the runs'
    ``samples`` (``best_stsb_dev: dev, checkpoint selection, full``; ``stsb: test, final evaluation, sample of
    300 pairs``)."""
    parsed = parse_name(select_name(metric) if metric.startswith("best_") else final_name(metric))
    which = "checkpoint selection (in-training dev evaluation)" if parsed.section == SELECT else "final evaluation"
    split = {"eval.align_uniform_split": "STS-B pairs of eval.align_uniform_split"}.get(parsed.split, parsed.split)
    return f"{metric}: {split}, {which}, {protocol_of(samples)}"


def _split_note(table: SweepTable) -> str:
    """The heading's note on what the sweep metric holds (:func:`figure_label` of its finished runs)."""
    done = table.runs[(table.runs["status"] == "FINISHED") & table.runs["value"].notna()] if len(table.runs) else table.runs
    return f" ({figure_label(table.metric, done['sample'] if 'sample' in done else ()).split(': ', 1)[1]})"


def _cell(row: dict[str, Any]) -> str:
    if not row["runs"]:
        return "—"
    ci = f" {_ci(row['ci95_low'], row['ci95_high'])}" if not math.isnan(row["ci95_low"]) else ""
    return f"{_mean_pm(row['mean'], row['std'])} ({row['n']}){ci}"  # mean ± std (n) [95% t-interval]


def _in_order(values: pd.Series) -> list[Any]:
    """The distinct values of a points column in :func:`_value_rank`'s order (numbers sorted, names as typed)."""
    return sorted(dict.fromkeys(values), key=_value_rank(values))


def markdown_sweep(table: SweepTable) -> str:
    """The sweep table as markdown: a grid (first key down, second across) for two keys, else one row per point."""
    frame = table.points
    if len(table.keys) == 2:
        across, down = table.keys  # the first swept key across (``method``: one column per method)
        columns = _in_order(frame[across])
        rows = []
        for value in _in_order(frame[down]):
            cells = {}
            for other in columns:
                match = [r for r in frame.to_dict("records") if _same(r[down], value) and _same(r[across], other)]
                cell = _cell(match[0]) if match else "—"
                if match and "vs_reference" in match[0] and match[0]["vs_reference"] not in ("—", ""):
                    cell += f" Δ {match[0]['vs_reference']}"
                    if match[0].get("kind_ref") == "pairs":  # a one-seed mark: its own figure, no seed noise
                        cell += f" (Δ of {match[0]['figure_ref']}, 1 seed)"
                cells[_fmt_value(other)] = cell
            rows.append({f"{down} \\ {across}": _fmt_value(value), **cells})
        return pd.DataFrame(rows).to_markdown(index=False, colalign=("left", *["right"] * len(columns)))
    done = table.runs[(table.runs["status"] == "FINISHED") & table.runs["value"].notna()] if len(table.runs) else table.runs
    final = protocol_of(done["final_sample"]) if "final_sample" in done else "—"
    shown = pd.DataFrame({
        **{key: [_fmt_value(v) for v in frame[key]] for key in table.keys},
        "runs": frame["runs"],
        f"{figure_label(table.metric, done['sample'] if 'sample' in done else ())} (mean ± std)":
            [_mean_pm(m, s) for m, s in zip(frame["mean"], frame["std"], strict=True)],
        "seeds n": frame["n"],
        "95% CI (t, over seeds)": [_ci(lo, hi) for lo, hi in zip(frame["ci95_low"], frame["ci95_high"], strict=True)],
        f"STS avg (test, final evaluation, {final})": [_mean_pm(m, s) for m, s in
                                                       zip(frame["sts_avg"], frame["sts_avg_std"], strict=True)],
    })
    if "vs_reference" in frame:  # seed-based marks and one-seed marks (Δ of a pairs figure) in their own columns
        pairs = frame["kind_ref"] == "pairs"
        shown.insert(5, "Δ vs reference (this metric, seeds)", frame["vs_reference"].where(~pairs, "—"))
        shown.insert(6, "Δ vs reference (1 seed: Δ of)", [f"{m} ({f})" if p else "—" for m, f, p in
                                                          zip(frame["vs_reference"], frame["figure_ref"], pairs, strict=True)])
    return shown.to_markdown(index=False)


# ------------------------------------------------------------------------------------------------
# Significance against the sweep's reference point
# ------------------------------------------------------------------------------------------------
def default_values(experiment: str | None) -> dict[str, Any]:
    """The flattened config a run of ``experiment`` has before any grid point or override (``{}`` when it
    does not compose here): the paper's default setting, which a sweep's reference point keeps.

    Composed from cl-bench's ``conf/`` with the options' schemas that the entry point stored in Hydra's ConfigStore
    (``cl-bench-report``: :func:`cl_bench.commands.report_cli.main`; a sweep's closing table: ``cl-bench`` at
    start-up), so that the report imports nothing of the configuration package."""
    try:
        from hydra import compose, initialize_config_dir
        from omegaconf import OmegaConf

        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[f"experiment={experiment}"] if experiment else [])
        return pd.json_normalize(OmegaConf.to_container(cfg, resolve=False), sep=".").iloc[0].to_dict()
    except Exception as err:  # noqa: BLE001 (no reference then; --reference names one)
        log.info("no default config for experiment %s: %s", experiment, err)
        return {}


_NO_DEFAULT = object()


def reference_point(sweep: SweepTable, runs: pd.DataFrame, given: str | None = None) -> tuple[str | None, str]:
    """The sweep's reference point and why: ``--reference``, else the one point whose swept keys all have
    their default value (the runs' experiment preset composed without a grid point: dropout 0.1 in
    ablation_dropout), else none.

    Raises:
        ReportError: ``given`` is no point of the sweep.
    """
    labels = list(sweep.points["point"])
    if given:
        if given not in labels:
            raise ReportError(f"--reference: no point '{given}' in the sweep; points: {'; '.join(labels)}")
        return given, "--reference"
    if not sweep.keys:
        return None, "no swept key"
    experiments = sorted(set(runs.get("tags.experiment", pd.Series(dtype=str)).dropna()) - {"None", "null", ""})
    experiment = experiments[0] if len(experiments) == 1 else None
    defaults = default_values(experiment) or (default_values(None) if experiment else {})
    if not defaults:
        return None, "no default config to take it from (pass --reference)"
    def default_of(key: str) -> Any:  # a swept config group (method=...) by its default option's name
        return defaults[key] if key in defaults else defaults.get(f"{key}.name", _NO_DEFAULT)

    found = [r["point"] for r in sweep.points.to_dict("records")
             if all(default_of(k) is not _NO_DEFAULT and _same(r[k], parse_value(default_of(k))) for k in sweep.keys)]
    if len(found) != 1:
        return None, "no point has every swept key at its default (pass --reference)"
    where = f"experiment={experiment}" if experiment else "cl-bench's defaults"
    return found[0], f"the point at the defaults of {where}"


def mark_against_reference(sweep: SweepTable, reference: str, tracking_uri: str | None, resamples: int,
                           controls: pd.DataFrame | None = None, resample_seed: int = 0) -> pd.DataFrame:
    """Add ``delta_ref, delta_ci_low, delta_ci_high, p_ref, p_holm_ref, test_ref, kind_ref, significant, vs_reference`` to
    ``sweep.points`` (:func:`cl_bench.reporting.significance.against_reference`) and return those rows, followed by
    one row per control run (:func:`load_controls`)."""
    placed = sweep.runs[(sweep.runs["status"] == "FINISHED") & sweep.runs["value"].notna()]
    if controls is not None and len(controls):
        placed = pd.concat([placed, controls[["run_id", "point", "value"]]], ignore_index=True)
    values = {label: list(placed.loc[placed["point"] == label, "value"])
              for label in [*sweep.points["point"], *(controls["point"] if controls is not None else [])]}
    task = METRIC_TASKS.get(sweep.metric, sweep.metric if sweep.metric.startswith(("sts", "sick")) else None)
    cache: dict[str, list[Any]] = {}

    folders = dict(zip(sweep.runs["run_id"], sweep.runs.get("run_dir", pd.Series([None] * len(sweep.runs))),
                       strict=True))

    def one(run_id: str) -> Any:  # the run folder's file when it is on this machine (a --sweep-dir report), else MLflow's
        folder = folders.get(run_id)
        if isinstance(folder, str) and RunDir(folder).pair_scores.is_file():
            return load_pair_scores(RunDir(folder).pair_scores)
        if tracking_uri is None:
            raise ReportError("no tracking URI to read pair scores from")
        return run_pair_scores(tracking_uri, run_id)

    def pair_scores(label: str) -> list[Any]:
        if label not in cache:
            cache[label] = [one(r) for r in placed.loc[placed["point"] == label, "run_id"]]
        return cache[label]

    marks = against_reference(values, reference, pair_scores, task, n_resamples=resamples, seed=resample_seed)
    marks.attrs["bootstrap"] = f"{resamples} resamples, resampling seed {resample_seed}"
    marks["vs_reference"] = [mark(r) for r in marks.to_dict("records")]
    marks = marks.rename(columns={"p": "p_ref", "p_holm": "p_holm_ref", "test": "test_ref", "kind": "kind_ref",
                                  "figure": "figure_ref"})
    for column in marks.columns[1:]:
        sweep.points[column] = list(marks[column][: len(sweep.points)])
    return marks


#: a training run's metric -> the eval run's figure that stands for it (the dev figure of the released weights)
CONTROL_METRICS = {"best_stsb_dev": "stsb_dev", "best_sts_dev_avg": "sts_dev_avg"}


def load_controls(tracking_uri: str, refs: Sequence[str], metric: str) -> pd.DataFrame:
    """Control runs (e.g. ``mode=eval`` of a paper's released checkpoint) to place beside a sweep's points.

    Args:
        tracking_uri: the MLflow store.
        refs: run ids, or ``tag=value`` (every finished run with that MLflow tag, any experiment;
            ``encoder=princeton-nlp/unsup-simcse-bert-base-uncased`` picks the runs of that checkpoint).
        metric: the sweep's metric; a control without it shows :data:`CONTROL_METRICS`' stand-in.

    Returns:
        ``run_id, run_name, point ("control: <name>"), encoder, pooler, metric, value, sts_avg`` and the
        ``provenance.*`` tags, one row per control run.

    Raises:
        ReportError: a run id that is not in the store, or a tag that selects no run.
    """
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    found: list[Any] = []
    for ref in refs:
        if "=" in ref:
            key, value = ref.split("=", 1)
            experiments = [e.experiment_id for e in client.search_experiments()]
            hits = client.search_runs(experiments, f"tags.`{key}` = '{value}' and attributes.status = 'FINISHED'")
            if not hits:
                raise ReportError(f"--control: no finished run with tag {key}={value} at {tracking_uri}")
            found += hits
        else:
            try:
                found.append(client.get_run(ref))
            except Exception as err:  # noqa: BLE001
                raise ReportError(f"--control: no run {ref} at {tracking_uri}") from err
    rows = []
    for run in found:
        metrics, tags = flat_view(run.data.metrics), run.data.tags  # either naming, by flat key
        used = metric if metric in metrics else CONTROL_METRICS.get(metric, metric)
        name = tags.get("mlflow.runName", run.info.run_id)
        rows.append({
            "run_id": run.info.run_id, "run_name": name, "point": f"control: {name}",
            "encoder": tags.get("encoder", ""), "pooler": tags.get("eval.pooler", tags.get("pooler", "")), "metric": used,
            "value": metrics.get(used, math.nan), "sts_avg": metrics.get("sts_avg", math.nan),
            **{k: v for k, v in tags.items() if k.startswith("provenance.")},
        })
    return pd.DataFrame(rows)


def markdown_controls(controls: pd.DataFrame, marks: pd.DataFrame | None) -> str:
    """The control rows: encoder, pooler, the compared figure, STS avg and, with a reference, Δ and its test."""
    by_point = {r["point"]: r for r in marks.to_dict("records")} if marks is not None else {}
    shown = pd.DataFrame({
        "control": controls["run_name"], "encoder": controls["encoder"], "pooler": controls["pooler"],
        "figure": [f"{m} = {_fmt(v)}" for m, v in zip(controls["metric"], controls["value"], strict=True)],
        "STS avg": [_fmt(v) for v in controls["sts_avg"]],
        "Δ vs reference": [by_point.get(p, {}).get("vs_reference", "—") for p in controls["point"]],
        "95% CI of Δ": [_ci(by_point[p]["delta_ci_low"], by_point[p]["delta_ci_high"]) if p in by_point else "—"
                        for p in controls["point"]],
        "test": [by_point.get(p, {}).get("test_ref", "—") for p in controls["point"]],
    })
    return shown.to_markdown(index=False, disable_numparse=True)


def provenance_table(frame: pd.DataFrame, label: str = "point") -> pd.DataFrame:
    """Per point (or control), each ``provenance.*`` field's value over its runs (``a | b`` when they differ)."""
    rows = []
    for point in dict.fromkeys(frame[label]):
        mine = frame[frame[label] == point]
        row = {label: point}
        for field_name in PROVENANCE_FIELDS:
            column = f"{PROVENANCE_TAG_PREFIX}{field_name}"
            seen = [str(v) for v in mine[column].dropna()] if column in mine else []
            row[field_name] = " | ".join(dict.fromkeys(seen)) or "—"
        rows.append(row)
    return pd.DataFrame(rows)


def markdown_reference(marks: pd.DataFrame, reference: str, why: str, metric: str = "the sweep metric") -> str:
    """The significance table: each point's difference to the reference, its CI, p, Holm-adjusted p and the test,
    seed-based and one-seed (test-set only) marks in separate columns."""
    def pvalue(p: float) -> str:
        return "—" if math.isnan(p) else f"{p:.3g}"

    pairs = marks["kind_ref"] == "pairs"
    no_test = marks["test_ref"] == ZERO_VARIANCE
    shown = pd.DataFrame({
        "point": marks["point"],
        "Δ of": [f if p else (metric if k == "seeds" else "—")
                 for f, p, k in zip(marks["figure_ref"], pairs, marks["kind_ref"], strict=True)],
        "Δ vs reference (seeds)": [ZERO_VARIANCE if z else ("—" if t else m)
                                   for m, t, z in zip(marks["vs_reference"], pairs, no_test, strict=True)],
        "Δ vs reference (1 seed, on the pairs)": marks["vs_reference"].where(pairs, "—"),
        "95% CI of Δ": [_ci(lo, hi) for lo, hi in zip(marks["delta_ci_low"], marks["delta_ci_high"], strict=True)],
        "p": [pvalue(p) for p in marks["p_ref"]],
        "Holm p": [pvalue(p) for p in marks["p_holm_ref"]],
        "test": marks["test_ref"],
    })
    family = int(marks["p_ref"].notna().sum())
    return (f"Reference: `{reference}` ({why}). Δ = point mean − reference mean. Test: Welch's t over seeds "
            "(`scipy.stats.ttest_ind`, unequal variances; CI of the difference of means) when both points have two "
            "seeds or more (none when no side has seed variance: t is undefined), else the paired bootstrap over the "
            "pairs of the runs' saved pair scores (`scipy.stats.bootstrap`, paired, percentile; two-sided p from "
            "its resampled differences): its Δ, interval and p are those of the figure named in `Δ of` (recomputed "
            "from those pairs), it covers the pairs' noise only, not seed noise, and its marks stand in "
            f"their own column{' (' + marks.attrs['bootstrap'] + ')' if 'bootstrap' in marks.attrs else ''}. "
            f"Holm family: the {family} point(s) tested against the reference; marks use the "
            "Holm-adjusted p (`*` < 0.05, `**` < 0.01).\n\n"
            + shown.to_markdown(index=False, disable_numparse=True))


# ------------------------------------------------------------------------------------------------
# Plots
# ------------------------------------------------------------------------------------------------
def _pyplot():  # noqa: ANN202
    """matplotlib's pyplot on the file-only Agg backend (reports are written on headless machines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(fig, ax, path: Path) -> Path:  # noqa: ANN001
    """Grid, legend, layout; write ``path`` and free the figure."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def plot_table(table: AblationTable, path: Path) -> Path:
    """The compared metric against the ablated value (mean ± std over seeds), with the paper's figures."""
    plt = _pyplot()
    frame = table.points
    x = list(range(len(frame)))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(frame) + 2), 4))
    # markers only: the points are categories (e.g. "fixed 0.1" after "p = 0.5"), not a continuum
    ax.errorbar(x, frame["mean"], yerr=frame["std"].fillna(0.0), fmt="o", capsize=4, markersize=7,
                label=f"cl-bench ({table.spec.metrics[0]}, mean ± std)")
    if frame["paper"].notna().any():
        ax.plot(x, frame["paper"], "s", color="tab:gray", markersize=7, label=f"paper ({table.spec.paper_setting})")
    ax.set_xticks(x, [textwrap.fill(label, 24) for label in frame["point"]], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(table.spec.paper_metric)
    ax.set_title(f"{table.spec.title}\n{table.spec.source}", fontsize=9)
    return _finish(fig, ax, path)


def plot_sweep(table: SweepTable, path: Path) -> Path:
    """The compared metric per point, mean ± std over seeds: x = the first swept key, one series per
    combination of the others (one per value of the second key in a 2-key grid)."""
    plt = _pyplot()
    frame = table.points
    first, others = (table.keys[0], table.keys[1:]) if table.keys else (None, [])
    xs = sorted(dict.fromkeys(frame[first]), key=_sort_key) if first else [None]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(xs) + 3), 4))
    series = sorted({tuple(r[k] for k in others) for r in frame.to_dict("records")}, key=lambda c: [_sort_key(v) for v in c])
    width = 0.5 / max(len(series), 1)
    # a line joins points only along a numeric key (dropout 0 -> 0.1 -> 0.3); categories (method=simcse, esimcse)
    # have no order or values between them: points only
    numeric = len(xs) > 1 and all(isinstance(v, int | float) and not isinstance(v, bool) for v in xs)
    for offset, combo in enumerate(series):
        mine = [r for r in frame.to_dict("records") if all(_same(r[k], v) for k, v in zip(others, combo, strict=True))]
        positions, means, stds = [], [], []
        for r in mine:
            x = next(i for i, value in enumerate(xs) if first is None or _same(r[first], value))
            positions.append(x + (offset - (len(series) - 1) / 2) * width)
            means.append(r["mean"])
            stds.append(0.0 if math.isnan(r["std"]) else r["std"])
        label = ", ".join(f"{k}={_fmt_value(v)}" for k, v in zip(others, combo, strict=True)) or table.metric
        ax.errorbar(positions, means, yerr=stds, fmt="o-" if numeric else "o", capsize=4, markersize=6, label=label)
    ax.set_xticks(range(len(xs)), [_fmt_value(v) for v in xs] if first else ["all runs"])
    ax.set_xlabel(first or "")
    ax.set_ylabel(textwrap.fill(f"{figure_label(table.metric, table.runs.get('sample', ()))} (mean ± std over seeds)", 50),
                  fontsize=8)
    ax.set_title(table.title(), fontsize=9)
    return _finish(fig, ax, path)


#: the evaluation key whose value is the number of embedding dimensions scored (Matryoshka prefixes)
TRUNCATE_KEY = "eval.truncate_dim"


def plot_truncation(table: SweepTable, path: Path) -> Path | None:
    """Score against embedding dimension: x = ``eval.truncate_dim``, y = ``sts_avg`` (else the sweep's metric),
    mean ± std over seeds, one line per combination of the other swept keys (a Matryoshka run beside a plain
    one). None when the sweep does not vary ``eval.truncate_dim``."""
    if TRUNCATE_KEY not in table.keys:
        return None
    runs = table.runs[(table.runs["status"] == "FINISHED") & table.runs[TRUNCATE_KEY].notna()]
    column = "sts_avg" if runs["sts_avg"].notna().any() else "value"
    runs = runs[runs[column].notna()]
    if runs.empty:
        return None
    plt = _pyplot()
    others = [k for k in table.keys if k != TRUNCATE_KEY]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    series = sorted({tuple(r[k] for k in others) for r in runs.to_dict("records")}, key=lambda c: [_sort_key(v) for v in c])
    for combo in series:
        mine = runs[[all(_same(r[k], v) for k, v in zip(others, combo, strict=True)) for r in runs.to_dict("records")]]
        dims = sorted({float(d) for d in mine[TRUNCATE_KEY]})
        stats = [_mean_std(mine[mine[TRUNCATE_KEY].astype(float) == d][column]) for d in dims]
        label = ", ".join(f"{k}={_fmt_value(v)}" for k, v in zip(others, combo, strict=True)) or "all runs"
        ax.errorbar(dims, [m for m, _ in stats], yerr=[0.0 if math.isnan(s) else s for _, s in stats], fmt="o-",
                    capsize=4, markersize=6, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("embedding dimensions scored (eval.truncate_dim)")
    ax.set_ylabel(f"{'sts_avg' if column == 'sts_avg' else table.metric} (mean ± std over seeds)")
    ax.set_title("Score against embedding dimension", fontsize=9)
    return _finish(fig, ax, path)


def plot_align_uniform(runs: pd.DataFrame, path: Path) -> Path | None:
    """SimCSE Figure 2's axes: one point per run (labelled by its sweep point), x = uniformity, y = alignment."""
    plt = _pyplot()
    points = runs[runs["align"].notna() & runs["uniform"].notna()]
    if points.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 5))
    for label in dict.fromkeys(points["point"]):
        mine = points[points["point"] == label]
        ax.scatter(mine["uniform"], mine["align"], label=label, s=30)
        for run in mine.to_dict("records"):
            seed = f" (seed {_fmt_value(run['seed'])})" if run.get("seed") is not None else ""
            ax.annotate(f"{label}{seed}", (run["uniform"], run["align"]), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")
    ax.set_xlabel("uniformity  ℓ_uniform (lower is better)")
    ax.set_ylabel("alignment  ℓ_align (lower is better)")
    ax.set_title(f"Alignment vs uniformity, one point per run ({len(points)} runs; SimCSE Fig. 2 axes)", fontsize=9)
    return _finish(fig, ax, path)


# ------------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------------
@dataclass
class Report:
    """What :func:`write_report` wrote: the sweep table, the papers' tables, and the runs left out."""

    sweep: SweepTable
    tables: list[AblationTable]
    unplaced: dict[str, str]  # run name -> why it is in no table
    files: list[Path]
    marks: pd.DataFrame | None = None  # each point against the reference (None: no reference point)
    reference: str | None = None
    reference_why: str = ""


def _why_not_in(spec: AblationSpec, run: dict[str, Any], forced: bool) -> str:
    """Why a run is not in a paper table (its experiment tag, or the knobs the table holds fixed)."""
    if run.get("status") != "FINISHED":
        return f"status {run.get('status')}"
    if not forced and run.get("tags.experiment") not in spec.experiments:
        return f"experiment tag {run.get('tags.experiment')} is not the table's"
    differing = [f"{k}={run_value(run, k, spec.assume)} (table: {v})" for k, v in spec.where.items()
                 if not values_equal(run_value(run, k, spec.assume), v)]
    return "; ".join(differing) or "no point of the table"


def write_report(
    runs: pd.DataFrame,
    out_dir: str | Path,
    ablations: Sequence[str] | None = None,
    source: str = "",
    metric: str | None = None,
    reference: str | None = None,
    tracking_uri: str | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    controls: Sequence[str] = (),
    resample_seed: int = 0,
) -> Report:
    """Write ``report.md``, ``sweep.csv``/``sweep.png``, a CSV and PNG per paper table, ``runs.csv`` and
    ``align_uniform.png``.

    Args:
        runs: ``mlflow.search_runs`` rows (every run of the sweep).
        out_dir: output directory (created).
        ablations: paper tables to add (default: those the runs' ``experiment`` tags belong to; none is fine).
        source: what the runs are (printed in the report's header).
        metric: the sweep table's metric (default: the first of :data:`SWEEP_METRICS` the runs have).
        reference: the sweep's reference point (default: :func:`reference_point`); every point is marked
            against it (:func:`mark_against_reference`).
        tracking_uri: where the runs' pair scores are read (the bootstrap test of one-seed points).
        resamples: bootstrap resamples of that test.
        resample_seed: the bootstrap's random seed (recorded in report.md).
        controls: control runs placed beside the points (:func:`load_controls`: run ids or ``tag=value``).

    Raises:
        ReportError: an unknown ``--ablation`` name or ``--reference`` point.
    """
    known = load_ablations()
    if ablations:
        specs, forced = resolve_ablations(ablations, known), True
    else:
        experiments = sorted(set(runs.get("tags.experiment", pd.Series(dtype=str)).dropna()))
        specs, forced = specs_for(experiments, known), False
    sweep = build_sweep_table(runs, metric)
    ref_label, ref_why = reference_point(sweep, runs, reference)
    control_runs = load_controls(tracking_uri, controls, sweep.metric) if controls and tracking_uri else None
    marks = mark_against_reference(sweep, ref_label, tracking_uri, resamples, control_runs, resample_seed) \
        if ref_label else None
    tables = [t for t in (build_table(runs, spec, forced) for spec in specs) if t is not None]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = dict(zip(sweep.runs["run_id"], sweep.runs["run_name"], strict=True))
    raw = {run["run_id"]: run for run in runs.to_dict("records")}
    failed = sweep.runs[sweep.runs["status"] != "FINISHED"]
    lines = [
        "# cl-bench sweep report",
        "",
        f"{source}: {len(runs)} runs, {len(runs) - len(failed)} finished"
        + (f", {len(failed)} not finished: {', '.join(failed['run_name'])}" if len(failed) else "") + ".",
        "",
        f"## {sweep.title()}",
        "",
        f"Swept keys (the overrides whose values differ among the runs, as typed; seeds are replicates): "
        f"{', '.join(f'`{k}`' for k in sweep.keys) or 'none'}. `{sweep.metric}`{_split_note(sweep)}, mean ± std over "
        "the runs of a point (their seeds), n = the number of runs (seeds), and the 95% confidence interval of the mean as a Student-t "
        "interval over the seeds (n − 1 degrees of freedom; shown from n = 2). A grid cell reads "
        "`mean ± std (n) [CI low, CI high]`.",
        "",
        markdown_sweep(sweep),
        "",
        *[f"{line}  " for line in sweep_notes(sweep)],
        "",
    ]
    lines += ["### Against the reference point", ""]
    lines += [markdown_reference(marks, ref_label, ref_why, sweep.metric) if marks is not None
              else f"No reference point: {ref_why}; no significance marks.", ""]
    if control_runs is not None:
        control_runs.to_csv(out / "controls.csv", index=False)
        lines += ["### Controls", "", "Runs placed beside the sweep for comparison (e.g. a paper's released checkpoint "
                  "scored with `mode=eval` and its required pooler), tested against the reference like a point:", "",
                  markdown_controls(control_runs, marks), ""]
    provenance_rows = pd.concat(
        [sweep.runs.assign(**{c: [raw[r].get(f"tags.{c}") for r in sweep.runs["run_id"]]
                              for c in {k[len("tags."):] for k in runs.columns if k.startswith("tags.provenance.")}}),
         *([control_runs] if control_runs is not None else [])], ignore_index=True)
    lines += ["### What the figures were measured with", "",
              "Per point, from each run's `provenance.*` tags (also in its results.json); `a | b` when its runs differ, "
              "— for runs recorded before cl-bench logged them.", "",
              provenance_table(provenance_rows).to_markdown(index=False, disable_numparse=True), ""]
    sweep_csv = out / "sweep.csv"
    sweep.points.to_csv(sweep_csv, index=False)
    sweep_png = plot_sweep(sweep, out / "sweep.png")
    files = [sweep_csv, sweep_png, *([out / "controls.csv"] if control_runs is not None else [])]
    lines += [f"![sweep]({sweep_png.name})", ""]
    truncation = plot_truncation(sweep, out / "truncation.png")
    if truncation is not None:
        files.append(truncation)
        lines += ["## Score against embedding dimension", "", f"![score vs dimension]({truncation.name})", ""]
    placed = set(sweep.runs[(sweep.runs["status"] == "FINISHED") & sweep.runs["value"].notna()]["run_id"])
    placed_in: dict[str, list[str]] = {run_id: ["sweep"] if run_id in placed else [] for run_id in sweep.runs["run_id"]}
    for table in tables:
        spec = table.spec
        csv_path = out / f"{spec.name}.csv"
        table.points.to_csv(csv_path, index=False)
        png_path = plot_table(table, out / f"{spec.name}.png")
        files += [csv_path, png_path]
        for run_id in table.runs["run_id"]:
            placed_in[run_id].append(spec.name)
        outside = [f"{names[run_id]} ({_why_not_in(spec, raw[run_id], forced)})" for run_id in sweep.runs["run_id"]
                   if run_id not in set(table.runs["run_id"])]
        lines += [
            f"## {spec.title} (paper table)",
            "",
            f"Paper: {spec.source}; {spec.paper_setting}; {spec.paper_metric}. "
            f"Reproduced: `{spec.metrics[0]}`; difference = reproduced − paper.",
            "",
            markdown_table(table),
            "",
            *[f"{line}  " for line in setting_lines(table)],
            "",
            f"![{spec.title}]({png_path.name})",
            "",
        ]
        if outside:
            lines += [f"Runs of the sweep outside this table: {'; '.join(outside)}.", ""]
    scatter = plot_align_uniform(sweep.runs[sweep.runs["status"] == "FINISHED"], out / "align_uniform.png")
    unplotted = sweep.runs[~sweep.runs["run_id"].isin(
        sweep.runs[(sweep.runs["status"] == "FINISHED") & sweep.runs["align"].notna() & sweep.runs["uniform"].notna()]["run_id"])]
    if scatter is not None:
        files.append(scatter)
        lines += ["## Alignment and uniformity", "", f"![alignment vs uniformity]({scatter.name})", ""]
    unplaced = {run["run_name"]: f"status {run['status']}" if run["status"] != "FINISHED" else f"no {sweep.metric} metric"
                for run in sweep.runs.to_dict("records") if run["status"] != "FINISHED" or math.isnan(run["value"])}
    lines += ["## Runs not in a table", ""]
    lines += [f"- {name}: {why}" for name, why in unplaced.items()] or ["None: every run is in the sweep table."]
    if len(unplotted):
        lines += ["", "Not in align_uniform.png (no alignment/uniformity figures): "
                  + ", ".join(f"{r['run_name']} ({'status ' + r['status'] if r['status'] != 'FINISHED' else 'not computed'})"
                              for r in unplotted.to_dict("records")) + "."]
    runs_path = out / "runs.csv"
    paper_points = {r["run_id"]: f"{t.spec.name}: {r['point']}" for t in tables for r in t.runs.to_dict("records")}
    sweep.runs.assign(
        **{c[len("tags."):]: [raw[r].get(c) for r in sweep.runs["run_id"]]
           for c in runs.columns if c.startswith("tags.provenance.")},
        metric=sweep.metric,
        tables=[";".join(placed_in[r]) for r in sweep.runs["run_id"]],
        paper_point=[paper_points.get(r, "") for r in sweep.runs["run_id"]],
        not_placed=[unplaced.get(n, "") for n in sweep.runs["run_name"]],
    ).to_csv(runs_path, index=False)
    report_path = out / "report.md"
    report_path.write_text("\n".join(lines) + "\n")
    files += [runs_path, report_path]
    return Report(sweep, tables, unplaced, files, marks, ref_label, ref_why)


def attach_to_parents(tracking_uri: str, parent_run_ids: Sequence[str], files: Sequence[Path]) -> list[str]:
    """Log the report's files to each sweep parent run under ``report/``; returns the runs reached."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    reached = []
    for run_id in parent_run_ids:
        try:
            for path in files:
                client.log_artifact(run_id, str(path), "report")
            reached.append(run_id)
        except Exception as err:  # the files on disk are the report; MLflow is a copy
            log.warning("could not attach the report to MLflow run %s: %s", run_id, err)
    return reached


# ------------------------------------------------------------------------------------------------
# Paired comparisons (--compare A B)
# ------------------------------------------------------------------------------------------------
def run_pair_scores(tracking_uri: str | None, run_id: str) -> Any:
    """A run's per-pair STS scores: from its run directory (tag ``run_dir``) when that is on this machine,
    else the MLflow artifact.

    Raises:
        ReportError: the run has none (evaluated before cl-bench saved them, or no STS task), or no store to ask
            (``tracking_uri`` None: a ``--sweep-dir`` report without one).
    """
    import tempfile

    if tracking_uri is None:
        raise ReportError(f"run {run_id}: no pair scores in its folder and no MLflow store to read them from "
                          "(--tracking-uri)")

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    run = client.get_run(run_id)
    local = run.data.tags.get("run_dir")
    if local and RunDir(local).pair_scores.is_file():
        return load_pair_scores(RunDir(local).pair_scores)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=RunDir.PAIR_SCORES,
                                                       tracking_uri=tracking_uri, dst_path=tmp)
            return load_pair_scores(path)
    except Exception as err:  # noqa: BLE001
        raise ReportError(f"run {run_id}: no {RunDir.PAIR_SCORES} (in its run dir or MLflow artifacts): {err}") from err


def eval_settings_of(metrics: dict[str, Any], provenance: dict[str, Any]) -> dict[str, str]:
    """The evaluation settings ``--compare`` holds two sides to (:data:`~cl_bench.reporting.significance.EVAL_SETTINGS`)
    of one run: the sample of its final figures (from their names, or an old run's ``eval_sample_pairs``) and its
    provenance's truncation, post-processing, pooler, precision and backend (``not recorded`` for older runs)."""
    sample = sample_of({k: v for k, v in metrics.items() if not _missing(v)})
    settings = {name: str(provenance.get(name, "not recorded")) for name in EVAL_SETTINGS if name != "sample"}
    return {"sample": FULL if sample is None else str(sample), **settings}


def _row_settings(run: dict[str, Any]) -> dict[str, str]:
    """:func:`eval_settings_of` of a :func:`load_runs` / :func:`load_run_dirs` row."""
    metrics = {k.removeprefix("metrics."): v for k, v in run.items() if k.startswith("metrics.")}
    provenance = {k.removeprefix(f"tags.{PROVENANCE_TAG_PREFIX}"): v for k, v in run.items()
                  if k.startswith(f"tags.{PROVENANCE_TAG_PREFIX}") and not _missing(v)}
    return eval_settings_of(metrics, provenance)


def resolve_side(ref: str, tracking_uri: str | None, runs: pd.DataFrame | None
                 ) -> tuple[str, list[Any], list[str], list[dict[str, str]]]:
    """What ``--compare`` names: a run directory, a point label of the sweep (``--parent-run`` /
    ``--experiment``; all its finished runs, its seeds), or an MLflow run id.

    Returns:
        (label, one pair-scores dict per run, the runs' names, each run's evaluation settings: :func:`eval_settings_of`).
    """
    import json

    if RunDir(ref).pair_scores.is_file():
        results = json.loads(RunDir(ref).results.read_text()) if RunDir(ref).results.is_file() else {}
        provenance = results.get("provenance") if isinstance(results.get("provenance"), dict) else {}
        return (Path(ref).name, [load_pair_scores(RunDir(ref).pair_scores)], [ref],
                [eval_settings_of(results, provenance)])
    if runs is not None:
        table = build_sweep_table(runs)
        mine = point_runs(table, runs, ref)
        if len(mine):
            label = mine["point"].iloc[0]
            local = dict(zip(runs["run_id"], runs.get("tags.run_dir", pd.Series([None] * len(runs))), strict=True))
            raw = {run["run_id"]: run for run in runs.to_dict("records")}
            return label, [load_pair_scores(RunDir(local[r]).pair_scores)
                           if isinstance(local.get(r), str) and RunDir(local[r]).pair_scores.is_file()
                           else run_pair_scores(tracking_uri, r) for r in mine["run_id"]], list(mine["run_name"]), \
                [_row_settings(raw[r]) for r in mine["run_id"]]
    if tracking_uri is None:
        raise ReportError(f"--compare: '{ref}' is no run directory or point of --sweep-dir (and no MLflow store to "
                          "look a run id up in: --tracking-uri)")
    import mlflow

    try:
        run = mlflow.MlflowClient(tracking_uri=tracking_uri).get_run(ref)
    except Exception as err:  # noqa: BLE001
        points = sorted(set(build_sweep_table(runs).points["point"])) if runs is not None else []
        hint = f"; points of the sweep: {'; '.join(points)}" if points else " (point labels need --parent-run or --experiment)"
        raise ReportError(f"--compare: '{ref}' is no run directory, point label or MLflow run id{hint}") from err
    provenance = {k.removeprefix(PROVENANCE_TAG_PREFIX): v for k, v in run.data.tags.items()
                  if k.startswith(PROVENANCE_TAG_PREFIX)}
    return (run.data.tags.get("mlflow.runName", ref), [run_pair_scores(tracking_uri, ref)], [ref],
            [eval_settings_of(dict(run.data.metrics), provenance)])


def point_runs(table: SweepTable, runs: pd.DataFrame, ref: str) -> pd.DataFrame:
    """The finished runs of the sweep point ``ref`` names: its label (``method=simcse, dropout=0.1``) or the
    overrides as typed on the command line (``method=simcse``, ``method=simcse dropout=0.1``; a param such
    as ``method.name=simcse`` works too), parsed by Hydra's ``OverridesParser``. Empty when ``ref`` is none.

    Raises:
        ReportError: ``ref`` matches runs of several points (the message lists them).
    """
    finished = table.runs[table.runs["status"] == "FINISHED"]
    exact = finished[finished["point"] == ref]
    if len(exact) or "=" not in ref:
        return exact
    try:
        wanted = {o.key_or_group: o.get_value_element_as_str()
                  for o in override_parser().parse_overrides(ref.replace(", ", " ").split())}
    except Exception:  # noqa: BLE001 (not overrides: no point, the caller says what is accepted)
        return exact
    raw = runs.set_index("run_id")
    keep = []
    for run in finished.to_dict("records"):
        matches = []
        for key, value in wanted.items():
            if key in table.keys:
                matches.append(_same(run[key], parse_value(value)))
            elif f"params.{key}" in raw:
                matches.append(values_equal(raw.loc[run["run_id"], f"params.{key}"], value))
            elif f"params.{key}.name" in raw:  # a config group by its choice, in runs that recorded no overrides
                matches.append(values_equal(raw.loc[run["run_id"], f"params.{key}.name"], value))
            else:
                matches.append(False)
        keep.append(all(matches))
    mine = finished[keep]
    if mine["point"].nunique() > 1:
        raise ReportError(f"--compare: '{ref}' matches {mine['point'].nunique()} points "
                          f"({'; '.join(dict.fromkeys(mine['point']))}); name one (e.g. '{mine['point'].iloc[0]}')")
    return mine


def _slug(label: str) -> str:
    """A file-name-safe form of a comparison side's label."""
    import re

    return re.sub(r"[^A-Za-z0-9._=-]+", "_", label).strip("_")[:60] or "run"


def write_compare(table: pd.DataFrame, label_a: str, label_b: str, out_dir: str | Path,
                  settings_a: Sequence[dict[str, str]] | None = None,
                  settings_b: Sequence[dict[str, str]] | None = None) -> list[Path]:
    """``compare_<A>_vs_<B>.csv`` and ``.md`` (the table, how it was computed, its warnings) in ``out_dir``: one
    pair of files per comparison, so comparing other runs does not overwrite an earlier answer. ``settings_a`` /
    ``settings_b``: each side's runs' evaluation settings (:func:`eval_settings_of`), which the headings and the
    warnings read."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"compare_{_slug(label_a)}_vs_{_slug(label_b)}"
    csv_path, md_path = out / f"{stem}.csv", out / f"{stem}.md"
    protocol = {"protocol_a": side_protocol(settings_a), "protocol_b": side_protocol(settings_b)}
    table.assign(label_a=label_a, label_b=label_b, **protocol).to_csv(csv_path, index=False)
    md_path.write_text(
        f"# {label_a} vs {label_b}\n\n"
        "A − B per STS task (SentEval `all` aggregation for STS12–16, test splits of STS-B and SICK-R; the split "
        "column says which, the pairs column on how many pairs, each side's heading its seeds and whether it ran "
        "the full protocol or a sample) and, with more than one task, their average. CI: paired bootstrap over "
        "those pairs (`scipy.stats.bootstrap`, "
        "paired, percentile), each resample rescoring every task with the same aggregation; with several seeds a "
        "side's figure is its seeds' mean; it holds test-set noise only. p (bootstrap): two-sided, from the "
        "resampled differences (twice the smaller share on either side of 0). Welch p: Welch's t-test over the "
        "seeds' figures (`scipy.stats.ttest_ind`, unequal variances), when both sides have two seeds or more. "
        "Holm: each test's p-values adjusted over its family (under the table).\n\n"
        + markdown_compare(table, label_a, label_b, settings_a=settings_a, settings_b=settings_b) + "\n\n"
        + "\n".join(f"- {line}" for line in compare_notes(table, label_a, label_b, settings_a, settings_b)) + "\n"
    )
    return [csv_path, md_path]


def main(argv: Sequence[str] | None = None) -> int:
    """Make the report (or ``--compare``) the command line ``argv`` asks for (:mod:`cl_bench.reporting.report_args`)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")

    tracking_uri = args.tracking_uri or default_tracking_uri()
    store = local_store(tracking_uri)
    if store is not None and not store.exists():  # a report reads a store: MLflow's client would create this one
        if args.sweep_dir and not args.tracking_uri:
            tracking_uri = None  # the sweep's folders alone (no ./mlflow.db made for nothing)
        else:
            how = "--tracking-uri" if args.tracking_uri else "the default store (--tracking-uri or $MLFLOW_TRACKING_URI)"
            print(f"cl-bench-report: error: --tracking-uri: no MLflow store at {store} ({how}); a report reads a "
                  "store and creates none", file=sys.stderr)
            return 2
    if args.compare:
        try:
            if args.sweep_dir:
                runs = load_run_dirs(args.sweep_dir)
            else:
                runs = load_runs(tracking_uri, args.experiment, args.parent_run) if (args.experiment or args.parent_run) \
                    else None
            (label_a, side_a, _, set_a), (label_b, side_b, _, set_b) = (resolve_side(ref, tracking_uri, runs)
                                                                        for ref in args.compare)
            table = compare(side_a, side_b, n_resamples=args.resamples, seed=args.resample_seed)
        except (ReportError, ValueError) as err:
            print(f"cl-bench-report: error: {err}", file=sys.stderr)
            return 2
        out = Path(args.out or Path("outputs") / "reports" / "compare")
        files = write_compare(table, label_a, label_b, out, set_a, set_b)
        notes = "\n".join(compare_notes(table, label_a, label_b, set_a, set_b))
        print(f"\nA = {label_a} ({len(side_a)} run(s); {side_protocol(set_a)}), B = {label_b} ({len(side_b)} run(s); "
              f"{side_protocol(set_b)}); per task its split and pairs, A − B with its 95% paired-bootstrap CI and p "
              f"on its row, Holm-adjusted over the family below; Welch's t over seeds\n"
              f"{markdown_compare(table, label_a, label_b, settings_a=set_a, settings_b=set_b)}\n{notes}\n\n"
              f"table: {files[0]}  ({files[1].name} beside it)")
        return 0
    if not (args.experiment or args.parent_run or args.sweep_dir):
        build_parser().error("one of --experiment, --parent-run, --sweep-dir or --compare is required")
    out = Path(args.out or Path("outputs") / "reports" / (args.experiment or args.parent_run or Path(args.sweep_dir or "").name))
    try:
        if args.sweep_dir:
            runs, args.no_attach = load_run_dirs(args.sweep_dir), True
            label = f"sweep directory `{args.sweep_dir}`"
        else:
            runs = load_runs(tracking_uri, args.experiment, args.parent_run)
            label = f"sweep (parent run) `{args.parent_run}`" if args.parent_run else f"MLflow experiment `{args.experiment}`"
        report = write_report(runs, out, args.ablation, label, args.metric, args.reference, tracking_uri, args.resamples,
                              args.control, args.resample_seed)
    except (ReportError, ReferenceDataError) as err:
        print(f"cl-bench-report: error: {err}", file=sys.stderr)
        return 2
    print(f"\n{report.sweep.title()}: {report.sweep.metric}{_split_note(report.sweep)}, mean ± std (seeds n) "
          f"[95% t-interval over seeds]\n{markdown_sweep(report.sweep)}")
    print("\n".join(sweep_notes(report.sweep)))
    if report.marks is not None:  # p and its mark on the console too, not only in report.md
        print(f"\n{report.sweep.metric} against the reference point{_split_note(report.sweep)}\n"
              f"{markdown_reference(report.marks, report.reference, report.reference_why, report.sweep.metric)}")
    for table in report.tables:
        print(f"\n{table.spec.title} ({table.spec.source})\n{markdown_table(table)}")
        print("\n".join(setting_lines(table)))
    for name, why in report.unplaced.items():
        print(f"not in a table: {name}: {why}")
    print(f"\nreport: {out / 'report.md'} ({len(runs)} runs)")
    if not args.no_attach:
        parents = [args.parent_run] if args.parent_run else sorted(
            {p for p in report.sweep.runs["parent_run_id"].dropna() if p}
        )
        reached = attach_to_parents(tracking_uri, parents, report.files)
        if reached:
            print(f"attached to MLflow parent run(s): {', '.join(reached)}")
    return 0


# ------------------------------------------------------------------------------------------------
# Paper comparisons: which table, on what setting, over which seeds
# ------------------------------------------------------------------------------------------------
#: what a run is compared to a paper's on: ``paper_run`` keys -> how a run records it
SETTING_KEYS = ("encoder", "steps", "batch")


def resolve_ablations(names: Sequence[str], known: dict[str, AblationSpec]) -> list[AblationSpec]:
    """``--ablation`` values: a table's name (``dropout``) or an experiment preset's (``ablation_dropout``:
    the tables whose runs that preset makes).

    Raises:
        ReportError: a name that is neither.
    """
    specs: list[AblationSpec] = []
    for name in names:
        found = [known[name]] if name in known else [s for s in known.values() if name in s.experiments]
        if not found:
            presets = sorted({e for s in known.values() for e in s.experiments})
            raise ReportError(f"--ablation: unknown {name}; valid: {', '.join(known)} "
                              f"(or an experiment preset: {', '.join(presets)})")
        specs += [s for s in found if s not in specs]
    return specs


def _run_setting(run: dict[str, Any], name: str) -> Any:
    """A run's encoder (``model.name_or_path``), steps trained (``steps``; older runs: ``train.max_steps``)
    or batch (``batch_size``); None when not recorded."""
    if name == "encoder":
        value = run.get("params.model.name_or_path") or run.get("tags.encoder")
        return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    if name == "steps":
        steps = run.get("metrics.steps")
        if steps is not None and not math.isnan(float(steps)):
            return int(steps)
        planned = parse_value(run.get("params.train.max_steps"))
        return int(planned) if isinstance(planned, int | float) and not isinstance(planned, bool) and planned > 0 else None
    value = parse_value(run.get("params.batch_size"))
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _same_setting(name: str, ours: Any, paper: Any) -> bool:
    if name == "encoder":  # a local folder of the same model counts: compare the last path part
        return Path(str(ours)).name.lower() == Path(str(paper)).name.lower()
    return values_equal(ours, paper)


def setting_lines(table: AblationTable) -> list[str]:
    """The encoder, steps and batch of the runs and of the paper, a warning when they differ, and a
    note when seeds repeat within a point (those runs count as one replicate)."""
    paper = table.spec.paper_run
    lines, differ = [], []
    ours_text, paper_text = [], []
    for name in SETTING_KEYS:
        values = sorted({str(v) for v in table.runs[f"setting.{name}"].dropna()}) if f"setting.{name}" in table.runs else []
        ours_text.append(f"{name} {'/'.join(values) or '?'}")
        paper_text.append(f"{name} {paper.get(name, '?') if paper.get(name) is not None else '?'}")
        if paper.get(name) is not None and values and any(not _same_setting(name, v, paper[name]) for v in values):
            differ.append(name)
    lines.append(f"Setting: these runs: {', '.join(ours_text)}; the paper: {', '.join(paper_text)}.")
    if differ:
        lines.append(f"WARNING: {', '.join(differ)} differ from the paper's run: the paper column is a reference "
                     "point, not a figure these runs should reach.")
    repeats = [f"{point['point']} ({point['runs']} runs, {point['seeds']} distinct seeds)"
               for point in table.points.to_dict("records") if point["runs"] > point["seeds"]]
    if repeats:
        lines.append("Repeated seeds are one replicate (their runs averaged first): " + "; ".join(repeats) + ".")
    return lines


def _by_seed(group: pd.DataFrame, column: str) -> pd.Series:
    """``column`` with the runs of a repeated seed averaged into one value: a rerun of the same seed is
    not an independent replicate (mean ± std are over distinct seeds). Runs without a seed count singly."""
    if group.empty or "seed" not in group:
        return group[column] if column in group else pd.Series(dtype=float)
    seeded = group[group["seed"].notna()]
    single = group[group["seed"].isna()][column]
    merged = seeded.groupby(seeded["seed"].map(str))[column].mean()
    return pd.concat([merged.reset_index(drop=True), single.reset_index(drop=True)], ignore_index=True)


# ------------------------------------------------------------------------------------------------
# Without MLflow: a sweep's runs from its run directories, and the summary a sweep ends with
# ------------------------------------------------------------------------------------------------
def load_run_dirs(sweep_dir: str | Path) -> pd.DataFrame:
    """A sweep's jobs read from their run directories, as ``mlflow.search_runs`` would give them.

    Each numbered job folder's ``params.json``, ``tags.json``, ``results.json`` (numbers) and
    ``status.json`` become ``params.*``, ``tags.*``, ``metrics.*`` and ``status``: ``logger=none``
    sweeps (and those whose MLflow was unreachable) are summarised and reported the same way.

    Raises:
        ReportError: no job folder with a ``params.json``.
    """
    import json

    rows = []
    jobs = [p for p in Path(sweep_dir).iterdir() if p.is_dir() and RunDir(p).params.is_file()] \
        if Path(sweep_dir).is_dir() else []
    for job in sorted(jobs, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name)):
        files = RunDir(job)
        read = lambda path: json.loads(path.read_text()) if path.is_file() else {}  # noqa: E731
        status = read(files.status).get("status", "RUNNING")
        row: dict[str, Any] = {
            "run_id": files.run_id.read_text().strip() if files.run_id.is_file() else str(job),
            "status": status,
            RUN_NAME_TAG: f"job {job.name}",
        }
        row.update({f"params.{k}": str(v) for k, v in read(files.params).items()})
        row.update({f"tags.{k}": str(v) for k, v in read(files.tags).items()})
        row.setdefault("tags.run_dir", str(job))  # where --compare finds its pair scores without MLflow
        if JOB_OVERRIDES_TAG not in row:
            row[JOB_OVERRIDES_TAG] = hydra_job_overrides(job)
        results = read(files.results)
        row.update({f"metrics.{k}": float(v) for k, v in results.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)})
        provenance = results.get("provenance") if isinstance(results.get("provenance"), dict) else {}
        row.update({f"tags.{PROVENANCE_TAG_PREFIX}{k}": v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                    for k, v in provenance.items() if f"tags.{PROVENANCE_TAG_PREFIX}{k}" not in row})
        rows.append(row)
    if not rows:
        raise ReportError(f"--sweep-dir: no cl-bench job folders (with params.json) in {sweep_dir}")
    return read_metric_names(pd.DataFrame(rows))


def sweep_summary(sweep_dir: str | Path, parent_run_id: str | None = None, tracking_uri: str | None = None,
                  ui_url: str | None = None, compare: str | None = None) -> str:
    """The lines a sweep ends with: its grid (swept values -> headline figure, mean ± std over seeds),
    the parent run, where MLflow shows it (and ``compare``, a line with its children's compare view),
    and the command that writes the full report."""
    table = build_sweep_table(load_run_dirs(sweep_dir))
    lines = [f"{table.title()}: {table.metric}{_split_note(table)}, mean ± std (seeds n) [95% t-interval over seeds]",
             markdown_sweep(table), *sweep_notes(table), ""]
    if parent_run_id:
        store = f" --tracking-uri {tracking_uri}" if tracking_uri else ""
        lines.append(f"MLflow parent run: {parent_run_id}" + (f"  {ui_url}" if ui_url else ""))
        lines += [compare] if compare else []
        lines.append(f"full report: cl-bench-report --parent-run {parent_run_id}{store}")
    else:
        lines.append(f"full report (no MLflow): cl-bench-report --sweep-dir {sweep_dir}")
    return "\n".join(lines)

