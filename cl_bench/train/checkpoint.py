"""Atomic training checkpoints: everything a killed run needs to continue bit-for-bit on CPU."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_bench.rundir import RunDir


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file, then rename: a kill never leaves a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def rng_states(method_rng: random.Random) -> dict[str, Any]:
    """Python, numpy, torch (CPU and CUDA) and the method's own RNG states."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "method": method_rng.getstate(),
    }


def restore_rng_states(states: dict[str, Any], method_rng: random.Random) -> None:
    """Inverse of :func:`rng_states`."""
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        # the devices this machine has (a run resumed on fewer GPUs than it was saved on: the first ones)
        for index, state in enumerate(states["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(state, index)
    method_rng.setstate(states["method"])


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run directory's checkpoint, or None when there is none."""
    path = RunDir(run_dir).checkpoint
    if not path.is_file():
        return None
    return torch.load(path, map_location="cpu", weights_only=False)


def remove_checkpoint(run_dir: Path) -> None:
    """Delete the run directory's resume checkpoint: called once a run has finished and its results are
    written, so that a finished run keeps one copy of its weights (``best_model/``)."""
    RunDir(run_dir).checkpoint.unlink(missing_ok=True)
