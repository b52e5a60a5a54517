"""One ETA for the whole job: the training steps left, the dev evaluations left and the final evaluation.

tqdm's own ETA counts training steps at a rate that the dev evaluations distort (a step followed by an
evaluation looks 50x slower), and it ends where the final evaluation starts. :class:`JobClock` times the
two kinds of work apart and adds what is left of each:

    left = steps left × seconds per training step
         + dev evaluations left × seconds per dev evaluation
         + final evaluation ≈ (its distinct sentences / a dev evaluation's) × seconds per dev evaluation

The final evaluation's share is scaled by the sentences it encodes (both encode with the same model and
batch size; :func:`cl_bench.eval.suite.encoding_workload` counts them); the transfer tasks' classifiers
are not in it. Until the first dev evaluation has been timed the evaluation part is unknown, and the
ETA reads ``≥`` the training part.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from cl_bench.utils.progress import format_seconds, progress_bar


class JobClock:
    """Times training steps and dev evaluations apart and tells the job's time left.

    Args:
        total_steps: the steps the run trains to.
        eval_steps: ``train.eval_steps`` (0: one dev evaluation, after the last step).
        start_step: the step this process starts from (after a resume).
        final_eval_ratio: the final evaluation's encoding work in dev evaluations (0: none).
        clock: seconds (``time.perf_counter``; tests pass a fake).
    """

    def __init__(self, total_steps: int, eval_steps: int, start_step: int = 0, final_eval_ratio: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.total_steps, self.eval_steps, self.start_step = total_steps, eval_steps, start_step
        self.final_eval_ratio, self.clock = final_eval_ratio, clock
        self.started = clock()
        self.eval_seconds, self.evals = 0.0, 0

    @contextmanager
    def dev_evaluation(self) -> Iterator[None]:
        """Time one dev evaluation (its time is not a training step's)."""
        started = self.clock()
        try:
            yield
        finally:
            self.eval_seconds += self.clock() - started
            self.evals += 1

    def evals_left(self, step: int) -> int:
        """Dev evaluations after ``step``: every ``eval_steps`` and after the last step."""
        if step >= self.total_steps:
            return 0
        if self.eval_steps <= 0:
            return 1
        return self.total_steps // self.eval_steps - step // self.eval_steps + (self.total_steps % self.eval_steps > 0)

    def left(self, step: int) -> tuple[float | None, bool]:
        """(seconds left in the job, whether the evaluations are in it) at ``step``; None before a step is timed."""
        done = step - self.start_step
        if done <= 0:
            return None, False
        training = (self.clock() - self.started - self.eval_seconds) / done * (self.total_steps - step)
        if not self.evals:
            return training, False
        per_eval = self.eval_seconds / self.evals
        return training + per_eval * (self.evals_left(step) + self.final_eval_ratio), True

    def text(self, step: int) -> str:
        """``04:10`` (training and evaluation), ``≥02:30`` (no dev evaluation timed yet) or ``?``."""
        seconds, complete = self.left(step)
        if seconds is None:
            return "?"
        return ("" if complete else "≥") + format_seconds(seconds)


def job_bar(total: int, initial: int, enabled: bool, job_left: Callable[[], str], stream: IO[str] | None = None) -> Any:
    """A tqdm bar whose ETA is the job's (``job_left()``), not tqdm's own count of the training steps; on a
    stream that is not a terminal (a log file, a pipe), plain lines saying the same at most every 30 s
    (:func:`cl_bench.utils.progress.progress_bar`)."""
    from tqdm.auto import tqdm

    class _JobBar(tqdm):  # type: ignore[misc, valid-type]
        @property
        def format_dict(self) -> dict[str, Any]:
            return {**super().format_dict, "job_left": job_left()}

    return progress_bar(total, "train", enabled, stream, extra=lambda: f"{job_left()} left with eval",
                        plain_unit="steps", tqdm_class=_JobBar, initial=initial, dynamic_ncols=True,
                        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{job_left} with eval, {rate_fmt}{postfix}]")
