"""``cl-bench-report``'s arguments: argparse only, so that ``--help`` and a wrong argument answer without pandas,
matplotlib or MLflow (:mod:`cl_bench.commands.report_cli` parses them, :mod:`cl_bench.reporting.report` reads them)."""

from __future__ import annotations

import argparse

from cl_bench.utils.arguments import OneLineParser, int_at_least

#: bootstrap resamples by default: at 10,000 the 95% interval endpoints move by a few hundredths between
#: resampling seeds (their Monte-Carlo error is printed beside them)
DEFAULT_RESAMPLES = 10_000
#: the sweep table's metric when ``--metric`` is not given: the first of these the runs have
SWEEP_METRICS = ("best_stsb_dev", "stsb_dev", "stsb", "sts_avg")


def build_parser() -> argparse.ArgumentParser:
    """The arguments of ``cl-bench-report``."""
    parser = OneLineParser(
        prog="cl-bench-report",
        description="Tables and plots of a sweep's MLflow runs, with the papers' tables where they apply.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--experiment", help="MLflow experiment name (e.g. ablation_dropout, cpu_repro)")
    source.add_argument("--parent-run", help="the sweep's MLflow parent run id (one sweep only)")
    source.add_argument("--sweep-dir", help="a sweep's directory: its jobs' run folders, no MLflow (logger=none)")
    parser.add_argument("--tracking-uri", help="MLflow store or server (default: $MLFLOW_TRACKING_URI, else ./mlflow.db)")
    parser.add_argument("--ablation", action="append", help="add this paper table (repeatable; default: from the runs' experiment tag)")
    parser.add_argument("--metric", help=f"the sweep table's metric (default: the first present of {', '.join(SWEEP_METRICS)})")
    parser.add_argument("--out", help="output directory (default: outputs/reports/<experiment or run id>)")
    parser.add_argument("--no-attach", action="store_true", help="do not log the report to the parent run(s)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"),
                        help="paired comparison of two runs or points: MLflow run ids, run directories, or points "
                             "of the sweep given by --parent-run/--experiment, spelt as on the command line "
                             "('method=simcse', 'dropout=0.1', 'method=simcse dropout=0.1' for one cell of a grid)")
    parser.add_argument("--resamples", type=int_at_least(1), default=DEFAULT_RESAMPLES,
                        help=f"bootstrap resamples of --compare and of the report's one-seed tests (default "
                             f"{DEFAULT_RESAMPLES}; fewer is faster and shows a larger Monte-Carlo error)")
    parser.add_argument("--resample-seed", type=int, default=0,
                        help="the bootstrap's random seed (default 0; recorded in the output)")
    parser.add_argument("--control", action="append", default=[],
                        help="a control run beside the sweep's points (repeatable): an MLflow run id, or tag=value "
                             "(e.g. encoder=princeton-nlp/unsup-simcse-bert-base-uncased: the mode=eval runs of that "
                             "released checkpoint)")
    parser.add_argument("--reference", help="the sweep's reference point label (default: the point at the preset's "
                                            "defaults, e.g. 'dropout=0.1'); every point is tested against it")
    return parser
