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
