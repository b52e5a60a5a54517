"""The software and hardware a run used, recorded as tags so a result can be reproduced."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import cl_bench


def git_commit(path: str | Path | None = None) -> str:
    """The cl-bench source tree's git commit (with ``-dirty`` when modified), or ``unknown``."""
    where = Path(path) if path else Path(cl_bench.__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=where, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        return f"{sha}-dirty" if dirty else sha
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment_tags(device: str | None = None) -> dict[str, str]:
    """Versions of torch/transformers/cl-bench, git commit, python, device and GPU count."""
    import torch
    import transformers

    return {
        "cl_bench.version": cl_bench.__version__,
        "cl_bench.git_commit": git_commit(),
        "torch.version": torch.__version__,
        "transformers.version": transformers.__version__,
        "python.version": platform.python_version(),
        "device": device or ("cuda" if torch.cuda.is_available() else "cpu"),
        "gpu.count": str(torch.cuda.device_count()),
        "gpu.name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
    }
