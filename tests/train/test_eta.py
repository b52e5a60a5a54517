"""One ETA for the whole job: training steps, dev evaluations and the final evaluation (a fake clock),
on the progress bar and in the log of a real short training."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR  # importing the CLI registers the config schemas
from cl_bench.config import typed_specs
from cl_bench.train.eta import JobClock, format_seconds, job_bar


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_job_left_counts_steps_dev_evaluations_and_the_final_evaluation() -> None:
    """10 steps of 1 s, a 5 s dev evaluation every 4 steps and after the last, a final evaluation of 3 dev
    evaluations' sentences: after step 4 and its evaluation, 6 steps + 2 dev evaluations + 3 are left."""
    clock = FakeClock()
    job = JobClock(total_steps=10, eval_steps=4, final_eval_ratio=3.0, clock=clock)
    assert job.text(0) == "?"
    for step in range(1, 5):
        clock.now += 1.0
        if step < 4:
            assert job.left(step) == (pytest.approx(10 - step), False)  # no evaluation timed yet
        if step == 3:
            assert job.text(3) == "≥00:07"
    with job.dev_evaluation():
        clock.now += 5.0
    assert job.evals_left(4) == 2 and job.evals_left(8) == 1 and job.evals_left(9) == 1 and job.evals_left(10) == 0
    assert job.left(4) == (pytest.approx(6 * 1.0 + 2 * 5.0 + 3 * 5.0), True)
    assert job.text(4) == "00:31"
    # tqdm's own ETA after the same 4 steps (9 s in all, dev evaluation included) would say 6 x 2.25 s = 13 s


def test_eval_steps_zero_and_a_resumed_run() -> None:
    clock = FakeClock()
    job = JobClock(total_steps=100, eval_steps=0, start_step=40, final_eval_ratio=0.0, clock=clock)
    assert job.evals_left(40) == 1 and job.evals_left(99) == 1 and job.evals_left(100) == 0
    clock.now += 20.0  # 10 steps this process: 2 s each
    assert job.left(50) == (pytest.approx(100.0), False)
    assert format_seconds(3723) == "1:02:03" and format_seconds(59.6) == "01:00"


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal: where the bar is drawn."""

    def isatty(self) -> bool:
        return True


def test_the_bar_shows_the_job_eta() -> None:
    bar = job_bar(total=10, initial=0, enabled=True, job_left=lambda: "04:10", stream=FakeTerminal())
    try:
        bar.update(2)
        assert "<04:10 with eval" in str(bar) and "2/10" in str(bar)
    finally:
        bar.close()


def test_off_a_terminal_the_job_eta_is_in_plain_lines() -> None:
    """A log file or a pipe gets whole lines (no \\r frames), each with the job's time left."""
    bar = job_bar(total=10, initial=0, enabled=True, job_left=lambda: "04:10", stream=io.StringIO())
    lines: list[str] = []
    bar.write = lines.append
    bar.update(2)
    bar.set_postfix(loss="0.5")
    bar.close()
    assert len(lines) == 1 and "\r" not in lines[0]
    assert lines[0].startswith("train: 2/10 steps (20%) in ") and lines[0].endswith("04:10 left with eval, loss=0.5")


def test_a_training_logs_the_job_left_after_each_dev_evaluation(tiny_bert: Path, data_dir: Path, tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    from cl_bench.train.loop import train

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[
            f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=16", "batch_size=4", "pooler=avg",
            "train.max_steps=3", "train.eval_steps=1", "train.save_best=false", "train.device=cpu",
            "train.progress_bar=false", "train.checkpoint_steps=0"])

    def dev_eval(encoder: object) -> dict[str, float]:
        time.sleep(0.05)
        return {"stsb_dev": 1.0}

    with caplog.at_level(logging.INFO, logger="cl_bench"):
        train(typed_specs(cfg), tmp_path, lambda metrics, step: None, dev_eval, final_eval_ratio=2.0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert len(lines) == 3
    assert all("left (training and evaluation)" in line for line in lines[:2]) and "left" not in lines[2]


class CountingEncoder:
    """Counts the distinct sentences it is asked to encode (what an evaluation's time scales with)."""

    def __init__(self) -> None:
        self.encoded = 0

    def encode(self, sentences: list[str], batch_size: int) -> np.ndarray:
        self.encoded += len(set(sentences))
        return np.array([[text.count(c) for c in "aeiostn "] for text in sentences], dtype=np.float32) + 1e-3


@pytest.mark.parametrize("preset", ["iterate", "quick"])
def test_the_eta_is_within_30_percent_from_the_first_dev_evaluation_on(data_dir: Path, preset: str) -> None:
    """A scripted job (issue 50): 50 steps of 9 s (the first 20 s: warm-up), a dev evaluation every 25 steps and the
    final evaluation, each costing 20 ms per distinct sentence it really encodes (counted: the job's dev evaluation and
    final evaluation of eval=iterate or eval=quick); the ETA scales the final evaluation by the job's own estimate
    (cli's final-evaluation ratio). From the first dev evaluation on, it is within 30% of what is left."""
    from cl_bench.commands.job import _final_eval_ratio
    from cl_bench.eval import EvalOptions, evaluate, evaluate_dev

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"eval={preset}", f"paths.data_dir={data_dir}", "eval.cache=false"])
    dev_encoder, final_encoder = CountingEncoder(), CountingEncoder()
    evaluate_dev(dev_encoder, data_dir, cfg.train.select_metric, sample_pairs=cfg.eval.sample_pairs)
    options = EvalOptions.from_config(cfg.eval)
    evaluate(final_encoder, data_dir, list(cfg.eval.tasks), options)
    dev, final = dev_encoder.encoded, final_encoder.encoded
    per_sentence, total, every = 0.02, 50, 25
    clock = FakeClock()
    job = JobClock(total_steps=total, eval_steps=every, final_eval_ratio=_final_eval_ratio(typed_specs(cfg)), clock=clock)
    script: list[tuple[int, str, float]] = []  # (step after which, kind, seconds) of every piece of work
    for step in range(1, total + 1):
        script.append((step, "step", 20.0 if step == 1 else 9.0))
        if step % every == 0:
            script.append((step, "dev", dev * per_sentence))
    script.append((total, "final", final * per_sentence))
    job_end = clock.now + sum(seconds for _, _, seconds in script)
    checked = 0
    for step, kind, seconds in script:
        with job.dev_evaluation() if kind == "dev" else contextlib.nullcontext():
            clock.now += seconds
        if job.evals and step < total:  # from the first dev evaluation on
            estimate, complete = job.left(step)
            truth = job_end - clock.now
            assert complete and abs(estimate - truth) <= 0.3 * truth, (step, estimate, truth)
            checked += 1
    assert checked == total - every
