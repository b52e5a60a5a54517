"""A stop asked for by a signal, seen by evaluation loops between batches.

``cl-bench``'s signal handler (:class:`cl_bench.cli.StopSignal`) calls :func:`request_stop`. Training
checks its own flag after each step; evaluation runs inside :func:`interruptible`, where every
encoding loop calls :func:`check` once per batch (and the suite between tasks), so a first
Ctrl-C/SIGTERM stops an evaluation at the next batch instead of minutes later. Outside such a
region (the dev evaluations of training) :func:`check` does nothing: training stops after its step.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

_signum: int | None = None
_depth = 0


class EvaluationInterrupted(Exception):
    """A stop was requested during an evaluation; ``partial`` holds the figures computed before it."""

    def __init__(self, signum: int, partial: dict[str, float] | None = None) -> None:
        self.signum = signum
        self.partial: dict[str, float] = dict(partial or {})
        super().__init__(f"{signal.Signals(signum).name} during evaluation")


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
