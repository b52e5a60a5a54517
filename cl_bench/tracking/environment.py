"""The software and hardware a run used, recorded as tags so a result can be reproduced."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import cl_bench


def _git(args: list[str], where: Path) -> str:
    return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=5, check=True).stdout.strip()


def git_commit(path: str | Path | None = None) -> str:
    """cl-bench's own commit, with ``-dirty`` when its repository has uncommitted changes to tracked files or
    untracked files inside the package; ``installed package, version X`` when cl-bench is not the root of a
    git repository (a wheel install, even one that sits inside another project's repository).

    Args:
        path: the package folder (default: the imported ``cl_bench``'s).
    """
    package = (Path(path) if path else Path(cl_bench.__file__).parent).resolve()
    installed = f"installed package, version {cl_bench.__version__}"
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], package)).resolve()
    except (OSError, subprocess.SubprocessError):
        return installed
    if top != package.parent:  # git found a repository above, but not cl-bench's own (package at its root)
        return installed
    try:
        sha = _git(["rev-parse", "HEAD"], package)
        tracked = _git(["status", "--porcelain", "--untracked-files=no"], top)
        untracked = _git(["status", "--porcelain", "--untracked-files=all", "--", package.name], top)
    except (OSError, subprocess.SubprocessError):
        return installed
    return f"{sha}-dirty" if tracked or untracked else sha


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
