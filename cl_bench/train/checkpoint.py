"""Atomic training checkpoints: everything a killed run needs to continue bit-for-bit on CPU.

A checkpoint is read with ``torch.load(weights_only=True)``: only tensors, containers, numbers and the
few numpy types of the RNG states cl-bench writes (:data:`ALLOWED_GLOBALS`) are unpickled. A file that
holds anything else (a pickle naming ``os.system``, a custom class) is refused before any of it runs:
``train.resume`` on a checkpoint from a shared folder cannot execute code.
"""

from __future__ import annotations

import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_bench.utils.atomic import write_file
from cl_bench.utils.rundir import RunDir


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary sibling, then rename: a kill or a full disk never leaves a half-written file.

    Raises:
        cl_bench.utils.atomic.SaveError: the save failed (one line: the file, why, the complete copy that remains).
    """
    write_file(path, lambda tmp: torch.save(obj, tmp))


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


class UnsafeCheckpointError(ValueError):
    """A checkpoint holding objects cl-bench does not write; the message is one line naming the file."""


def _numpy_globals() -> list[Any]:
    """What ``np.random.get_state()``'s array needs to unpickle: ndarray, dtype, its reconstructor and the
    concrete dtype classes (numpy >= 1.25 pickles ``numpy.dtypes.UInt32DType`` and kin)."""
    try:
        from numpy._core.multiarray import _reconstruct  # numpy 2
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import _reconstruct
    dtype_classes = [type(np.dtype(code)) for code in ("uint32", "int64", "float64")]
    return [np.ndarray, np.dtype, _reconstruct, *dtype_classes]


#: what cl-bench's checkpoints hold beyond torch's own weights-only allow-list (the numpy RNG state)
ALLOWED_GLOBALS: list[Any] = _numpy_globals()


def _refusal(path: Path, what: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"train.resume: {path} holds {what}, which cl-bench checkpoints never do; refused (loaded with "
        "weights_only=True, nothing in it ran)"
    )


def check_checkpoint(path: Path) -> None:
    """Refuse ``path`` before training starts when its pickle names any object outside torch's weights-only
    allow-list and :data:`ALLOWED_GLOBALS` (reads only the pickle's opcodes, not its tensors).

    Raises:
        UnsafeCheckpointError: what it names, one line.
    """
    if not zipfile.is_zipfile(path):  # not torch.save's format: the weights-only load decides
        load_checkpoint_file(path)
        return
    with torch.serialization.safe_globals(ALLOWED_GLOBALS):
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    if unsafe:
        raise _refusal(path, ", ".join(sorted(unsafe)))


def load_checkpoint_file(path: Path) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` with :data:`ALLOWED_GLOBALS` allowed.

    Raises:
        UnsafeCheckpointError: the file holds anything else (nothing in it is run).
    """
    try:
        with torch.serialization.safe_globals(ALLOWED_GLOBALS):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        # torch's message is several lines; its first says which global or opcode was refused
        first = next((line.strip() for line in str(err).splitlines() if "Unsupported" in line or "GLOBAL" in line),
                     str(err).splitlines()[0] if str(err) else type(err).__name__)
        raise _refusal(path, f"an object outside the allow-list ({first[:200]})") from err


def load_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run directory's checkpoint (:func:`load_checkpoint_file`), or None when there is none.

    Raises:
        UnsafeCheckpointError: the checkpoint holds objects cl-bench does not write.
    """
    path = RunDir(run_dir).checkpoint
    if not path.is_file():
        return None
    return load_checkpoint_file(path)


def remove_checkpoint(run_dir: Path) -> None:
    """Delete the run directory's resume checkpoint: called once a run has finished and its results are
    written, so that a finished run keeps one copy of its weights (``best_model/``)."""
    RunDir(run_dir).checkpoint.unlink(missing_ok=True)
