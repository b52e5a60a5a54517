"""Run names short enough for MLflow's runs table (its Run Name column shows about 22 characters)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra.types import RunMode
from omegaconf import OmegaConf

from cl_bench.commands.job import run_name
from cl_bench.tracking.names import RUN_NAME_CHARS, fit_run_name


@pytest.mark.parametrize(
    ("head", "parts", "sweep", "name"),
    [
        ("", [("dropout", "0"), ("seed", "44")], True, "dropout=0 seed=44"),
        ("", [(None, "dropout_0.1"), ("seed", "44")], True, "dropout_0.1 seed=44"),
        ("", [("dropout", "0.15"), ("tau", "0.001"), ("seed", "44")], True, "0.15 0.001 seed=44"),
        ("", [("dropout", "0.15"), ("tau", "0.001"), ("lr", "0.0001"), ("batch_size", "128"), ("seed", "44")], True,
         "0.15 0.001 … seed=44"),
        ("simcse", [("tau", "0.05")], False, "simcse tau=0.05"),
        ("simcse", [("pooler", "avg"), (None, "wiki1m_head"), ("max_steps", "50"), ("eval_steps", "25"),
                    (None, "quick")], False, "simcse pooler=avg …"),
        ("simcse", [("tau", "0.05"), ("seed", "1234567")], False, "simcse … seed=1234567"),
        ("", [(None, "dropout_fixed_0.1"), ("seed", "44")], True, "dropout_fixed_0.1 s44"),
    ],
)
def test_names_fit_the_column(head: str, parts: list, sweep: bool, name: str) -> None:
    assert fit_run_name(head, parts, keys_named_elsewhere=sweep) == name
    assert len(name) <= RUN_NAME_CHARS
    assert fit_run_name(head, parts, limit=None).count("=") >= sum(label is not None for label, _ in parts)


def _hydra(overrides: list[str], mode: RunMode = RunMode.RUN, sweep_dir: Path | None = None) -> SimpleNamespace:
    return SimpleNamespace(overrides=SimpleNamespace(task=overrides), mode=mode, job=SimpleNamespace(name="cli"),
                           sweep=SimpleNamespace(dir=str(sweep_dir)))


def test_a_single_runs_name_leaves_out_housekeeping_and_fits() -> None:
    """The README's offline run: the method, then what changes the trained model, in 22 characters."""
    cfg = OmegaConf.create({"mode": "train", "method": {"name": "simcse"}, "model": {"name_or_path": "x"}})
    argv = ["method=simcse", "model.name_or_path=../shared/models/all-MiniLM-L6-v2", "pooler=avg", "data=wiki1m_head",
            "train.max_steps=50", "train.eval_steps=25", "eval=quick", "train.num_threads=1", "train.progress_bar=false"]
    assert run_name(cfg, _hydra(argv)) == "simcse avg …"  # a group by its choice; "…": parts left out
    assert run_name(cfg, _hydra(argv), limit=None) == "simcse avg wiki1m_head max_steps=50 eval_steps=25 quick"
    assert run_name(cfg, _hydra(["method=simcse", "loss.tau=0.1", "train.num_threads=2"])) == "simcse tau=0.1"


def test_a_sweep_childs_name_is_its_point_and_seed(tmp_path: Path) -> None:
    """``experiment=ablation_dropout seeds=3``: the point's choice and the seed, well inside the column."""
    import json

    from cl_bench.utils.rundir import SweepDir

    SweepDir(tmp_path).varied_keys_file.write_text(json.dumps(["experiment/points", "seed"]))
    cfg = OmegaConf.create({"mode": "train", "method": {"name": "simcse"}, "model": {"name_or_path": "x"}})
    hydra_cfg = _hydra(["experiment=ablation_dropout", "+experiment/points=dropout_fixed_0.1", "seeds=3", "seed=44"],
                       RunMode.MULTIRUN, tmp_path)
    assert run_name(cfg, hydra_cfg) == "dropout_fixed_0.1 s44"
    hydra_cfg.overrides.task[1] = "+experiment/points=dropout_0.1"
    assert run_name(cfg, hydra_cfg) == "dropout_0.1 seed=44"
    assert run_name(cfg, hydra_cfg, exclude=("seed", "seeds"), limit=None) == "dropout_0.1"
