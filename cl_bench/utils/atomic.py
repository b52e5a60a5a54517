"""Atomic saves: every file and folder a run keeps is written beside its place and renamed into it.

A crash, a kill or a full disk then leaves either the previous complete version or the new one, never a half:
``checkpoint.pt`` (:func:`cl_bench.train.checkpoint.atomic_save`), ``best_model/`` and an exported folder
(:func:`atomic_folder`), ``results.json``, ``status.json`` and the other JSON records (:func:`write_text`). A save
that fails raises :class:`SaveError`, one line saying which file, why, and which complete copy remains.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path


class SaveError(OSError):
    """A save that did not happen; ``str()`` is one line: the file, the reason, what complete copy remains."""

    def __init__(self, path: Path, cause: BaseException, kept: bool) -> None:
        code_number = getattr(cause, "errno", None)
        super().__init__(code_number, getattr(cause, "strerror", None) or str(cause))
        reason = getattr(cause, "strerror", None) or (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        code = f" ({errno.errorcode[code_number]})" if code_number in errno.errorcode else ""
        remains = (f"the previous complete {path.name} is kept unchanged at {path}" if kept
                   else f"no earlier copy of {path.name} exists")
        self.path, self.kept = path, kept
        self.message = f"could not save {path}: {reason}{code}; {remains}"

    def __str__(self) -> str:
        return self.message


def _write_failure(err: BaseException) -> bool:
    """An error that means the bytes did not reach the disk: an OSError (ENOSPC, EROFS, EIO...), or torch's
    RuntimeError for the same (``torch.save``: "PytorchStreamWriter failed writing file ...")."""
    return isinstance(err, OSError) or (isinstance(err, RuntimeError) and "writ" in str(err).lower())


def _sibling(path: Path, tag: str) -> Path:
    # hidden, beside the target (same filesystem, so the rename is atomic), one per process
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}")


def write_file(path: Path, write: Callable[[Path], object]) -> None:
    """``write(temporary sibling)``, then rename it onto ``path``.

    Raises:
        SaveError: the write or the rename failed; the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    tmp = _sibling(path, "tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)  # never a half file left beside the complete one
        if _write_failure(err) and not isinstance(err, SaveError):
            raise SaveError(path, err, kept=path.exists()) from err
        raise


def write_text(path: Path, text: str) -> None:
    """Atomically write ``text`` to ``path`` (:func:`write_file`)."""
    write_file(path, lambda tmp: tmp.write_text(text))


@contextlib.contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """Yield an empty temporary sibling folder to fill; on success it replaces ``path``.

    The previous folder is moved aside only once the new one is complete, and deleted after the new one is in
    place (two renames: a kill between them leaves the complete previous folder as ``.<name>.old-<pid>`` beside it).

    Raises:
        SaveError: filling or renaming failed (e.g. ENOSPC); the temporary folder is removed and ``path`` keeps
            the previous complete folder, byte for byte.
    """
    path = Path(path)
    tmp, old = _sibling(path, "tmp"), _sibling(path, "old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        yield tmp
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)  # never a half folder
        if old.exists() and not path.exists():
            os.replace(old, path)  # the new folder never took its place: the previous one goes back
        if _write_failure(err):
            raise SaveError(path, err, kept=path.exists()) from err
        raise
    shutil.rmtree(old, ignore_errors=True)
