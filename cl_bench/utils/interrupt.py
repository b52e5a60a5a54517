"""A stop asked for by a signal, seen by evaluation loops between batches.

``cl-bench``'s signal handler (:class:`cl_bench.commands.job.StopSignal`) calls :func:`request_stop`. Training
checks its own flag after each step; evaluation runs inside :func:`interruptible`, where every
encoding loop calls :func:`check` once per batch (and the suite between tasks), so a first
Ctrl-C/SIGTERM stops an evaluation at the next batch instead of minutes later. Outside such a
region (the dev evaluations of training) :func:`check` does nothing: training stops after its step.

A job run in a launcher's worker process (Hydra's joblib launcher: loky workers) outlives a killed
launcher unless told: :func:`stop_with_launcher` sends it SIGTERM when the launcher dies, which stops
it like a user's SIGTERM (run marked KILLED); then the worker process exits.

Before that handler is in place (start-up: the checks, Hydra's set-up, the run's tracker) :func:`stop_at_startup`'s
handler raises :class:`Stopped`, so a SIGINT/SIGTERM there ends the command with 128+signal and the run folder, if
one was made, marked KILLED, not killed by the signal half-way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

_signum: int | None = None
_depth = 0
LAUNCHER_PID_ENV = "CL_BENCH_LAUNCHER_PID"  # set by the cl-bench process that launches the jobs
_watching = False


class EvaluationInterrupted(Exception):
    """A stop was requested during an evaluation; ``partial`` holds the figures computed before it."""

    def __init__(self, signum: int, partial: dict[str, float] | None = None) -> None:
        self.signum = signum
        self.partial: dict[str, float] = dict(partial or {})
        super().__init__(f"{signal.Signals(signum).name} during evaluation")


class Stopped(BaseException):  # noqa: N818 (like KeyboardInterrupt: not an Exception, so nothing swallows it)
    """A SIGINT/SIGTERM during start-up (:func:`stop_at_startup`); ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"{signal.Signals(signum).name} during start-up")


def _startup_handler(signum: int, frame: object) -> None:
    if _exit_at_once:
        exit_stopped(signum)
    raise Stopped(signum)


_exit_at_once = False


def exit_at_once_on_signal() -> None:
    """In a sweep's launching process: a signal outside a job's own handler runs the :func:`at_stop` actions and exits
    at once (:func:`exit_stopped`) instead of raising :class:`Stopped` through the launcher (joblib would terminate its
    workers, which stop themselves, results so far and KILLED, when this process is gone: :func:`stop_with_launcher`)."""
    global _exit_at_once
    _exit_at_once = True


def exit_stopped(signum: int) -> NoReturn:
    """Say it in one line, run the :func:`at_stop` actions, exit with 128+``signum`` (at once, as the signal's default
    would: no atexit hook waits for a launcher's workers)."""
    import logging
    import sys

    print(f"cl-bench: stopped by {signal.Signals(signum).name}", file=sys.stderr)
    stopped(signum)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + signum)


_job_dir: Path | None = None
_at_stop: list[Callable[[int], None]] = []


def at_stop(action: Callable[[int], None]) -> None:
    """Run ``action(signum)`` when a signal stops this process outside a job's own handler (:func:`stopped`): e.g. end a
    sweep's MLflow parent run KILLED before the launching process exits."""
    _at_stop.append(action)


def stopped(signum: int) -> None:
    """The actions :func:`at_stop` registered, each once; one that fails is logged, the others still run."""
    import logging

    while _at_stop:
        action = _at_stop.pop(0)
        try:
            action(signum)
        except Exception as err:  # noqa: BLE001 (the process is exiting on a signal: say it and go on)
            logging.getLogger(__name__).warning("on stop: %s", err)


def note_job_dir(path: Path) -> None:
    """Remember the folder Hydra made for the job starting in this process (Hydra's ``on_job_start``)."""
    global _job_dir
    _job_dir = path


def job_dir() -> Path | None:
    """The folder of the job last started in this process (:func:`note_job_dir`), None before any."""
    return _job_dir


def stop_at_startup() -> None:
    """SIGINT and SIGTERM raise :class:`Stopped` until the run's own handler replaces this one (and after it)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(signum, _startup_handler)
        except ValueError:  # not the main thread
            pass


def request_stop(signum: int) -> None:
    """Ask running evaluations to stop at their next batch (called from the signal handler)."""
    global _signum
    _signum = signum


def reset() -> None:
    """Forget a stop request (the signal handler's scope ended)."""
    global _signum
    _signum = None


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A region (an evaluation) that a stop request ends at the next :func:`check`."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def check(partial: dict[str, float] | None = None) -> None:
    """Raise :class:`EvaluationInterrupted` (carrying ``partial``) when a stop was requested in an evaluation.

    Call it once per encoding batch, and between tasks with the figures computed so far.
    """
    if _signum is not None and _depth:
        raise EvaluationInterrupted(_signum, partial)


def mark_launcher() -> None:
    """Record this process as the launcher of the jobs it runs (its worker processes inherit the variable)."""
    os.environ[LAUNCHER_PID_ENV] = str(os.getpid())


def _launcher_pid() -> int:
    return int(os.environ.get(LAUNCHER_PID_ENV, "0") or 0)


def launcher_died() -> bool:
    """True in a launcher's worker process whose launcher is gone (it was re-parented)."""
    launcher = _launcher_pid()
    return launcher not in (0, os.getpid()) and os.getppid() != launcher


def stop_with_launcher(poll_seconds: float = 0.5) -> None:
    """In a job running in a child process of the launcher, get SIGTERM when the launcher dies.

    A daemon thread watches the parent process id, as torch's DataLoader workers do: a dead launcher's
    children are re-parented. (Linux's ``PR_SET_PDEATHSIG`` is not used: it fires once per exiting thread of
    the parent, and a second SIGTERM means "stop at once".) In the launcher's own process (the basic
    launcher, a single run) and where the job's parent is not the launcher (SLURM), this does nothing.
    """
    global _watching
    launcher = _launcher_pid()
    if _watching or launcher in (0, os.getpid()) or os.getppid() != launcher:
        return

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(poll_seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="cl-bench-launcher-watch", daemon=True).start()
    _watching = True  # one watcher per worker process, however many jobs it runs
