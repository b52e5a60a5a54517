"""The one folder cl-bench caches things in (downloaded data, ONNX exports, embeddings, back-translations)."""

from __future__ import annotations

import os
from pathlib import Path

#: environment variable that moves the whole cache
CACHE_ENV = "CL_BENCH_CACHE"


def cache_root() -> Path:
    """``$CL_BENCH_CACHE``, else ``$XDG_CACHE_HOME/cl-bench``, else ``~/.cache/cl-bench`` (beside transformers')."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "cl-bench"


def default_data_dir() -> Path:
    """The data root: ``$CL_BENCH_DATA`` if set, else ``data/`` in cl-bench's cache folder (:func:`cache_root`).
    ``conf/paths/default.yaml`` reads this function (resolver ``cl_bench.data_dir``); here, not in
    :mod:`cl_bench.data.download`, so that composing a config imports no HTTP client (cl-bench's answers before torch).
    """
    if os.environ.get("CL_BENCH_DATA"):
        return Path(os.environ["CL_BENCH_DATA"])
    return cache_root() / "data"
