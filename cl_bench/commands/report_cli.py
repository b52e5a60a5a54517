"""``cl-bench-report``'s entry point: the command line parsed (:mod:`cl_bench.reporting.report_args`) before the report's
libraries load.

``--help`` and a wrong argument answer from here, without importing pandas, matplotlib or MLflow
(:mod:`cl_bench.reporting.report` does the work once the arguments are valid).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from cl_bench.reporting.report_args import build_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point: parse (``--help`` and errors end here), then make the report."""
    build_parser().parse_args(argv)
    # loaded once the arguments are valid: the config's schemas (Hydra, OmegaConf), with which the report composes an
    # experiment's defaults (cl_bench.reporting.report.default_values), and the report's stack (pandas, matplotlib)
    from cl_bench.config import register_schemas
    from cl_bench.reporting.report import main as make_report

    register_schemas()
    return make_report(argv)


if __name__ == "__main__":
    sys.exit(main())
