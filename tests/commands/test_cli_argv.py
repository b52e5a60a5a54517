"""The command line as typed reaches Hydra: flags (``-m``/``--multirun``, ``--cfg``) anywhere (issue 39, item 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra._internal.utils import get_args_parser

from cl_bench.commands.cli import flags_first

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [
    ["model.name_or_path=DIR", "-m", "method=simcse,sg_opt", "dropout=0,0.1"],
    ["model.name_or_path=DIR", "method=simcse,sg_opt", "dropout=0,0.1", "--multirun"],
    ["-m", "model.name_or_path=DIR", "method=simcse,sg_opt", "dropout=0,0.1"],
])
def test_a_multirun_flag_anywhere_is_hydras_multirun(argv: list[str]) -> None:
    """Hydra's own parser reads the reordered command line as a multirun of the overrides, in their order."""
    args = get_args_parser().parse_args(flags_first(argv))
    assert args.multirun
    assert args.overrides == ["model.name_or_path=DIR", "method=simcse,sg_opt", "dropout=0,0.1"]


def test_a_flags_value_stays_with_its_flag() -> None:
    """``--cfg job``, ``-cn NAME``, ``--info config``: values without ``=`` are not overrides; ``~key`` is one."""
    argv = ["dropout=0", "--cfg", "job", "~train.num_threads", "-cn", "config", "seed=3"]
    assert flags_first(argv) == ["--cfg", "job", "-cn", "config", "dropout=0", "~train.num_threads", "seed=3"]
    args = get_args_parser().parse_args(flags_first(argv))
    assert (args.cfg, args.config_name, args.overrides) == ("job", "config", ["dropout=0", "~train.num_threads", "seed=3"])


def test_python_m_cl_bench_with_m_last_launches_the_sweep(tmp_path: Path) -> None:
    """``python -m cl_bench ... -m KEY=a,b`` (the torchrun form) runs the sweep: its first job's failure names the
    job and its swept value (not argparse's usage and "unrecognized arguments")."""
    proc = subprocess.run(
        [sys.executable, "-m", "cl_bench", "mode=eval", "model.name_or_path=./no_such_model", "logger=none",
         "hydra.sweep.dir=sweep", "-m", "eval.batch_size=8,16"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "unrecognized arguments" not in proc.stderr and "usage:" not in proc.stderr, proc.stderr
    assert proc.returncode == 2 and "job 0 (" in proc.stderr and "eval.batch_size=8" in proc.stderr, proc.stderr
    assert "model.name_or_path: no Hugging Face model at" in proc.stderr
