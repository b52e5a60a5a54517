"""Where cl-bench's config folder is: ``conf/`` beside the package (a source checkout or an editable install), or the
folder ``CL_BENCH_CONF`` names.

It sits at the bottom so that every layer finds the same folder without importing the configuration package: the
configuration (:mod:`cl_bench.config.catalog`, which adds the user's search path) and the report, which reads the grid
points' files and composes an experiment's defaults (:mod:`cl_bench.reporting`).
"""

from __future__ import annotations

import os
from pathlib import Path

#: conf/ beside the package (source checkout or editable install); CL_BENCH_CONF overrides it.
CONF_DIR = Path(os.environ.get("CL_BENCH_CONF", Path(__file__).resolve().parents[2] / "conf"))
