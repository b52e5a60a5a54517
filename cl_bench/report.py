"""``cl-bench-report``: an ablation sweep's MLflow runs, as tables and plots against the papers.

    cl-bench experiment=ablation_dropout seed=42,43,44            # the sweep
    cl-bench-report --experiment ablation_dropout                  # its report
    cl-bench-report --parent-run 3f2a...                           # one sweep (its MLflow parent run)

For every ablation table of :mod:`cl_bench.reference_results` that the runs belong to, the report
gives per point the reproduced figure (mean ± std over seeds), the paper's figure and the
difference, as ``<table>.csv`` and in ``report.md``; ``<table>.png`` plots the figure against the
ablated value next to the paper's, and ``align_uniform.png`` places every run on SimCSE's Figure 2
axes (uniformity, alignment). The files go to ``--out`` and are attached to the sweep's parent
run(s) in MLflow under ``report/``. Runs are read with ``mlflow.search_runs`` (a pandas DataFrame).
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cl_bench.reference_results import AblationSpec, ReferenceDataError, load_ablations, specs_for

log = logging.getLogger("cl_bench.report")

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
    return runs.reset_index(drop=True)


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
            "run_id": run["run_id"],
            "run_name": run.get(RUN_NAME_TAG, ""),
            "parent_run_id": run.get(PARENT_TAG),
            "seed": run.get("params.seed"),
            "point": point.label if point else spec.other_label(run),
            "value": _first_metric(run, spec.metrics),
            **{name: _first_metric(run, (name,)) for name in EXTRA_METRICS},
        })
    if not used:
        return None
    used_runs = pd.DataFrame(used)
    order = [p.label for p in spec.points] + sorted(set(used_runs["point"]) - {p.label for p in spec.points})
    paper = {p.label: p.paper for p in spec.points}
    rows = []
    for label in order:
        group = used_runs[used_runs["point"] == label]
        mean, std = _mean_std(group["value"])
        sts_mean, sts_std = _mean_std(group["sts_avg"])
        figure = paper.get(label)
        rows.append({
            "point": label,
            "runs": len(group),
            "mean": mean,
            "std": std,
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
        f"reproduced ({table.spec.metrics[0]})": [_mean_pm(m, s) for m, s in zip(frame["mean"], frame["std"], strict=True)],
        "paper": [_fmt(v, 1) for v in frame["paper"]],
        "difference": [("—" if math.isnan(v) else f"{v:+.2f}") for v in frame["difference"]],
        "STS avg": [_mean_pm(m, s) for m, s in zip(frame["sts_avg"], frame["sts_avg_std"], strict=True)],
    })
    return shown.to_markdown(index=False, colalign=("left", "right", "right", "right", "right", "right"))


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


def plot_align_uniform(tables: Sequence[AblationTable], path: Path) -> Path | None:
    """SimCSE Figure 2's axes: one point per run, x = uniformity, y = alignment (lower is better)."""
    plt = _pyplot()
    points = []
    seen: set[str] = set()
    for table in tables:
        for run in table.runs.to_dict("records"):
            if run["run_id"] in seen or math.isnan(run["align"]) or math.isnan(run["uniform"]):
                continue
            seen.add(run["run_id"])
            points.append((table.spec.title, run["point"], run["uniform"], run["align"]))
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 5))
    for title in dict.fromkeys(p[0] for p in points):
        mine = [p for p in points if p[0] == title]
        ax.scatter([p[2] for p in mine], [p[3] for p in mine], label=title, s=30)
        for _, label, u, a in mine:
            ax.annotate(label, (u, a), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("uniformity  ℓ_uniform (lower is better)")
    ax.set_ylabel("alignment  ℓ_align (lower is better)")
    ax.set_title("Alignment vs uniformity, one point per run (SimCSE Fig. 2 axes)", fontsize=9)
    return _finish(fig, ax, path)


# ------------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------------
def write_report(
    runs: pd.DataFrame,
    out_dir: str | Path,
    ablations: Sequence[str] | None = None,
    source: str = "",
) -> tuple[list[AblationTable], list[Path]]:
    """Write ``report.md``, one CSV and one PNG per ablation table, ``runs.csv`` and ``align_uniform.png``.

    Args:
        runs: ``mlflow.search_runs`` rows.
        out_dir: output directory (created).
        ablations: table names to report (default: those the runs' ``experiment`` tags belong to).
        source: what the runs are (printed in the report's header).

    Returns:
        The tables and the files written.

    Raises:
        ReportError: when no table matches the runs.
    """
    known = load_ablations()
    if ablations:
        unknown = [a for a in ablations if a not in known]
        if unknown:
            raise ReportError(f"--ablation: unknown {', '.join(unknown)}; valid: {', '.join(known)}")
        specs, forced = [known[a] for a in ablations], True
    else:
        experiments = sorted(set(runs.get("tags.experiment", pd.Series(dtype=str)).dropna()))
        specs, forced = specs_for(experiments, known), False
        if not specs:
            raise ReportError(
                f"no ablation table for experiment tag(s) {', '.join(experiments) or 'none'}; "
                f"pass --ablation NAME (valid: {', '.join(known)})"
            )
    tables = [t for t in (build_table(runs, spec, forced) for spec in specs) if t is not None]
    if not tables:
        raise ReportError(f"no finished run matches the table(s) {', '.join(s.name for s in specs)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    failed = runs[runs["status"] != "FINISHED"]
    lines = [
        "# cl-bench ablation report",
        "",
        f"{source}: {len(runs)} runs, {len(runs) - len(failed)} finished"
        + (f", {len(failed)} not finished: {', '.join(_names(failed))}" if len(failed) else "") + ".",
        "Reproduced = mean ± std over the runs of a point (seeds); difference = reproduced − paper.",
        "",
    ]
    for table in tables:
        spec = table.spec
        csv_path = out / f"{spec.name}.csv"
        table.points.to_csv(csv_path, index=False)
        png_path = plot_table(table, out / f"{spec.name}.png")
        files += [csv_path, png_path]
        lines += [
            f"## {spec.title}",
            "",
            f"Paper: {spec.source}; {spec.paper_setting}; {spec.paper_metric}. "
            f"Reproduced: `{spec.metrics[0]}`.",
            "",
            markdown_table(table),
            "",
            f"![{spec.title}]({png_path.name})",
            "",
        ]
    scatter = plot_align_uniform(tables, out / "align_uniform.png")
    if scatter is not None:
        files.append(scatter)
        lines += ["## Alignment and uniformity", "", f"![alignment vs uniformity]({scatter.name})", ""]
    runs_path = out / "runs.csv"
    pd.concat([t.runs.assign(ablation=t.spec.name) for t in tables]).to_csv(runs_path, index=False)
    report_path = out / "report.md"
    report_path.write_text("\n".join(lines))
    files += [runs_path, report_path]
    return tables, files


def _names(frame: pd.DataFrame) -> list[str]:
    names = frame.get(RUN_NAME_TAG, frame["run_id"]).fillna(frame["run_id"])
    return [str(n) for n in names]


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


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point."""
    from cl_bench.tracking.mlflow_logger import default_tracking_uri

    parser = argparse.ArgumentParser(
        prog="cl-bench-report",
        description="Tables and plots of an ablation sweep's MLflow runs against the papers' figures.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--experiment", help="MLflow experiment name (e.g. ablation_dropout, cpu_repro)")
    source.add_argument("--parent-run", help="the sweep's MLflow parent run id (one sweep only)")
    parser.add_argument("--tracking-uri", help="MLflow store or server (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    parser.add_argument("--ablation", action="append", help="report this table (repeatable; default: from the runs' experiment tag)")
    parser.add_argument("--out", help="output directory (default: outputs/reports/<experiment or run id>)")
    parser.add_argument("--no-attach", action="store_true", help="do not log the report to the parent run(s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")

    tracking_uri = args.tracking_uri or default_tracking_uri()
    out = Path(args.out or Path("outputs") / "reports" / (args.experiment or args.parent_run))
    try:
        runs = load_runs(tracking_uri, args.experiment, args.parent_run)
        label = f"sweep (parent run) `{args.parent_run}`" if args.parent_run else f"MLflow experiment `{args.experiment}`"
        tables, files = write_report(runs, out, args.ablation, label)
    except (ReportError, ReferenceDataError) as err:
        print(f"cl-bench-report: error: {err}", file=sys.stderr)
        return 2
    for table in tables:
        print(f"\n{table.spec.title} ({table.spec.source})\n{markdown_table(table)}")
    print(f"\nreport: {out / 'report.md'}")
    if not args.no_attach:
        parents = [args.parent_run] if args.parent_run else sorted(
            {p for t in tables for p in t.runs["parent_run_id"].dropna() if p}
        )
        reached = attach_to_parents(tracking_uri, parents, files)
        if reached:
            print(f"attached to MLflow parent run(s): {', '.join(reached)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
