"""``train.resume=<dir>`` continues in that directory: no second run dir, and it says what this process trained."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import cli_env


@pytest.mark.slow  # a stopped and a resumed tiny run (~2 min on a busy 2-core machine)
def test_resume_continues_in_the_given_dir(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    args = [shutil.which("cl-bench") or "cl-bench", f"model.name_or_path={tiny_bert}", "data=wiki1m_head",
            "data.limit=160", "batch_size=8", "train.max_steps=200", "train.eval_steps=100", "train.checkpoint_steps=2",
            "train.progress_bar=false", "eval=quick", "eval.anisotropy=false", "logger=none"]
    first = tmp_path / "first"
    with (tmp_path / "first.log").open("w") as out:
        proc = subprocess.Popen([*args, f"hydra.run.dir={first}"], cwd=tmp_path, env=cli_env(data_dir), stdout=out,
                                stderr=subprocess.STDOUT)
        started = time.time()
        while not (first / "checkpoint.pt").exists():
            assert proc.poll() is None and time.time() - started < 300, (tmp_path / "first.log").read_text()[-3000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
    stopped_at = json.loads((first / "results.json").read_text())["run/interrupted_at_step"]
    assert 0 < stopped_at < 200

    # no hydra.run.dir: Hydra makes outputs/runs/<date>/<time>/, which must not stay beside the continued run
    resumed = subprocess.run([*args, "train.max_steps=200", f"train.resume={first}"], cwd=tmp_path,
                             env=cli_env(data_dir), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not list((tmp_path / "outputs").rglob("*.log")) and not list((tmp_path / "outputs").rglob(".hydra"))
    results = json.loads((first / "results.json").read_text())
    assert results["train/steps"] == 200 and "sts/stsb" in results
    output = resumed.stdout + resumed.stderr
    assert f"trained {200 - int(stopped_at)} steps" in output and f"(steps {int(stopped_at) + 1}-200 in this process" in output
    assert "continuing run directory" in (first / "cli.log").read_text()  # the job log continued in the run dir
