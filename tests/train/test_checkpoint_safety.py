"""Checkpoints load with ``weights_only=True``: what cl-bench writes loads, a planted pickle is refused unrun."""

from __future__ import annotations

import pickle
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import cli_env
from omegaconf import OmegaConf

from cl_bench.config import ConfigError
from cl_bench.train.checkpoint import (
    UnsafeCheckpointError,
    atomic_save,
    check_checkpoint,
    load_checkpoint,
    restore_rng_states,
    rng_states,
)


class _WritesAFile:
    """A pickle payload: unpickling it would create ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


def _checkpoint_like_the_loop(path: Path) -> dict[str, object]:
    """What TrainLoop.checkpoint writes: method, optimizer, scheduler (transformers' linear warm-up), state, RNGs."""
    from transformers import get_linear_schedule_with_warmup

    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = get_linear_schedule_with_warmup(optimizer, 2, 10)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    scheduler.step()
    content = {"method": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
               "scaler": None, "state": {"step": 3, "epoch": 0, "best_score": float("-inf")},
               "rng": [rng_states(random.Random(7))], "best": {k: v.clone() for k, v in model.state_dict().items()}}
    atomic_save(content, path)
    return content


def test_a_checkpoint_cl_bench_writes_loads_weights_only_and_restores_the_rng(tmp_path: Path) -> None:
    written = _checkpoint_like_the_loop(tmp_path / "checkpoint.pt")
    check_checkpoint(tmp_path / "checkpoint.pt")
    loaded = load_checkpoint(tmp_path)
    assert loaded is not None and loaded["state"] == written["state"]
    torch.testing.assert_close(loaded["method"]["weight"], written["method"]["weight"])
    np.random.seed(123)  # another state than the saved one
    restore_rng_states(loaded["rng"][0], random.Random())
    np.testing.assert_array_equal(np.random.get_state()[1], written["rng"][0]["numpy"][1])


@pytest.mark.parametrize("writer", ["torch.save", "pickle"])
def test_a_planted_pickle_is_refused_and_never_runs(tmp_path: Path, writer: str) -> None:
    marker = tmp_path / "pwned.txt"
    path = tmp_path / "checkpoint.pt"
    payload = {"method": _WritesAFile(marker)}
    if writer == "torch.save":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload))
    for load in (check_checkpoint, lambda p: load_checkpoint(p.parent)):
        with pytest.raises(UnsafeCheckpointError) as refused:
            load(path)
        assert str(path) in str(refused.value) and "\n" not in str(refused.value)
    assert not marker.exists()


def test_train_resume_on_a_planted_checkpoint_is_a_config_error(tmp_path: Path) -> None:
    from cl_bench.commands.job import resume_dir

    marker = tmp_path / "pwned.txt"
    torch.save({"rng": _WritesAFile(marker)}, tmp_path / "checkpoint.pt")
    with pytest.raises(ConfigError, match="train.resume: .*checkpoint.pt holds builtins.exec"):
        resume_dir(OmegaConf.create({"train": {"resume": str(tmp_path)}}), tmp_path / "new")
    assert not marker.exists()


@pytest.mark.slow  # one cl-bench process up to its pre-flight (~20 s on a busy 2-core machine)
def test_the_cli_answers_a_planted_checkpoint_in_one_line_with_exit_2(tiny_bert: Path, data_dir: Path,
                                                                      tmp_path: Path) -> None:
    marker = tmp_path / "pwned.txt"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    torch.save({"method": _WritesAFile(marker)}, run_dir / "checkpoint.pt")
    done = subprocess.run(
        [shutil.which("cl-bench") or "cl-bench", f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=16",
         "train.max_steps=2", "eval=quick", "logger=none", f"train.resume={run_dir}", f"hydra.run.dir={tmp_path / 'h'}"],
        cwd=tmp_path, env=cli_env(data_dir), capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("cl-bench: error:")]
    assert len(errors) == 1 and "checkpoint.pt holds builtins.exec" in errors[0]
    assert not marker.exists()
