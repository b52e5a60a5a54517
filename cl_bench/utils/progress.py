"""Progress that reads well wherever it goes: a tqdm bar on a terminal, plain periodic lines elsewhere.

A tqdm bar redraws itself with carriage returns. On a terminal that is one line updating in place; in a
log file or a pipe (``cl-bench ... > train.log 2>&1``, ``| tee``, a batch scheduler's output file) every
redraw stays as a ``\\r`` frame and log lines are glued onto the frames. :func:`progress_bar` therefore draws
a bar only when its stream is a terminal and otherwise returns :class:`PlainProgress`, which has the part of
tqdm's interface cl-bench (and pooch's downloader) uses and writes one whole line at most every
:data:`PLAIN_INTERVAL_S` seconds, and a last one when it closes.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import IO, Any

log = logging.getLogger("cl_bench.progress")

#: seconds between two plain progress lines (a log file of a long run gets a line per half minute, not per step)
PLAIN_INTERVAL_S = 30.0


def on_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: stderr, where tqdm draws) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def format_seconds(seconds: float) -> str:
    """``1:02:03`` / ``02:03`` (tqdm's style)."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class PlainProgress:
    """Progress as whole lines: ``train: 120/500 (24%) in 02:10, 3.1 it/s, 05:30 left with eval, loss=0.92``.

    The subset of tqdm's interface used by cl-bench's loops and by :class:`pooch.HTTPDownloader`
    (``update``, ``set_postfix``, ``reset``, ``close``, ``n``, ``total``, a context manager).

    Args:
        total: units to reach (None or 0: unknown).
        desc: what progresses (``train``, ``back-translating``).
        unit: the unit's name (``it``, ``sent``, ``B``).
        initial: units already done (a resumed run).
        unit_scale: show counts with k/M/G prefixes (bytes).
        extra: returns text added to each line (the job's time left, see :func:`cl_bench.train.eta.job_bar`).
        write: where lines go (default: INFO on the ``cl_bench.progress`` logger, so Hydra's log file gets them).
        interval: seconds between two lines.
        clock: seconds (``time.monotonic``; tests pass a fake).
    """

    def __init__(self, total: float | None, desc: str, unit: str = "it", initial: float = 0, unit_scale: bool = False,
                 extra: Callable[[], str] | None = None, write: Callable[[str], None] | None = None,
                 interval: float = PLAIN_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.unit, self.unit_scale = total, desc, unit, unit_scale
        self.n = self.start_n = initial
        self.extra, self.write = extra, write or log.info
        self.interval, self.clock = interval, clock
        self.started = self.last_line = clock()
        self.written_n: float | None = None
        self.postfix = ""
        self.closed = False

    def _count(self, value: float) -> str:
        if self.unit_scale:
            from tqdm import tqdm

            return tqdm.format_sizeof(value, self.unit, 1024 if self.unit == "B" else 1000)
        return f"{value:g}"

    def line(self) -> str:
        """The line for the current state."""
        elapsed = self.clock() - self.started
        done = self._count(self.n) + (f"/{self._count(self.total)}" if self.total else "")
        if not self.unit_scale and self.unit != "it":
            done += f" {self.unit}"
        parts = [f"{self.desc}: {done}" + (f" ({100 * self.n / self.total:.0f}%)" if self.total else "")
                 + f" in {format_seconds(elapsed)}"]
        if elapsed > 0 and self.n > self.start_n:
            rate = (self.n - self.start_n) / elapsed
            parts.append(f"{self._count(rate)}/s" if self.unit_scale else f"{rate:.3g} {self.unit}/s")
        if self.extra is not None:
            parts.append(self.extra())
        if self.postfix:
            parts.append(self.postfix)
        return ", ".join(parts)

    def _emit(self) -> None:
        self.write(self.line())
        self.last_line, self.written_n = self.clock(), self.n

    def update(self, n: float = 1) -> None:
        """Count ``n`` more units; write a line when :attr:`interval` seconds passed since the last one."""
        self.n += n
        if self.clock() - self.last_line >= self.interval:
            self._emit()

    def set_postfix(self, **values: Any) -> None:
        """Text after the counts (``loss=0.92``), in the next line written."""
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def reset(self, total: float | None = None) -> None:
        """Back to zero (pooch does this before filling the count to the total)."""
        self.n = self.start_n = 0
        if total is not None:
            self.total = total

    def close(self) -> None:
        """Write the last line (unless the last line written already says it); idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.written_n != self.n and self.n > self.start_n:
            self._emit()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: float | None, desc: str, enabled: bool = True, stream: IO[str] | None = None,
                 write: Callable[[str], None] | None = None, extra: Callable[[], str] | None = None,
                 plain_unit: str | None = None, tqdm_class: Any = None, **tqdm_kwargs: Any) -> Any:
    """A tqdm bar on a terminal, :class:`PlainProgress` lines elsewhere, a disabled bar when not ``enabled``.

    Args:
        total: units to reach.
        desc: the bar's label.
        enabled: False: nothing is drawn or written (tqdm's ``disable``).
        stream: where a bar would be drawn (default stderr); only its being a terminal matters here.
        write: where plain lines go (see :class:`PlainProgress`).
        extra: text added to each plain line (a bar shows it through its own ``bar_format``).
        plain_unit: the unit plain lines name (default: tqdm's ``unit``).
        tqdm_class: a tqdm subclass to draw with (default ``tqdm.auto.tqdm``).
        tqdm_kwargs: passed to tqdm; ``initial``, ``unit`` and ``unit_scale`` also to :class:`PlainProgress`.
    """
    if tqdm_class is None:
        from tqdm.auto import tqdm as tqdm_class
    if enabled and not on_terminal(stream):
        return PlainProgress(total, desc, unit=plain_unit or tqdm_kwargs.get("unit", "it"),
                             initial=tqdm_kwargs.get("initial", 0), unit_scale=bool(tqdm_kwargs.get("unit_scale", False)),
                             extra=extra, write=write)
    return tqdm_class(total=total, desc=desc, disable=not enabled, **({"file": stream} if stream else {}), **tqdm_kwargs)
