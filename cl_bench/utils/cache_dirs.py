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


#: environment variable naming the data root
DATA_ENV = "CL_BENCH_DATA"


def data_dir_from_environment() -> Path | None:
    """``$CL_BENCH_DATA`` as an absolute path (``~`` expanded, a relative value taken from the current folder),
    or None when it is unset or empty. Resolved here once, because a relative value (the README's
    ``../shared/data``) means another folder once a run, a symlink or a subprocess starts elsewhere; symlinks
    in it are kept (``os.path.abspath``, not ``Path.resolve``), so the path reads as the user wrote it."""
    value = os.environ.get(DATA_ENV)
    if not value:
        return None
    return Path(os.path.abspath(os.path.expanduser(value)))


def default_data_dir() -> Path:
    """The data root: ``$CL_BENCH_DATA`` (made absolute, :func:`data_dir_from_environment`) if set, else ``data/``
    in cl-bench's cache folder (:func:`cache_root`). ``conf/paths/default.yaml`` reads this function (resolver
    ``cl_bench.data_dir``); here, not in :mod:`cl_bench.data.download`, so that composing a config imports no HTTP
    client (cl-bench's answers before torch).
    """
    return data_dir_from_environment() or cache_root() / "data"
