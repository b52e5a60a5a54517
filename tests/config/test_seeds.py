"""``seeds=N``: N replicates of every grid point, for every ablation preset; rejected where it cannot act."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, job_config, sweep_jobs

from cl_bench.config import ConfigError, validate
from cl_bench.config.catalog import CONF_DIR
from cl_bench.config.seeds import expand_seeds

#: every preset that launches a grid by itself (the ablation_* presets, augmentation_comparison, cpu_repro)
ABLATIONS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml")
                   if p.stem.startswith("ablation_") or "mode: MULTIRUN" in p.read_text())


def _extra(argv: list[str]) -> list[str]:
    """The overrides ``expand_seeds`` adds for the sweeper (flags dropped)."""
    return [a for a in expand_seeds(argv) if not a.startswith("-") and not a.startswith("experiment=")]


def test_expansion() -> None:
    assert expand_seeds(["method=simcse"]) == ["method=simcse"]
    assert expand_seeds(["seeds=1", "seed=7"]) == ["seeds=1", "seed=7"]
    assert expand_seeds(["seeds=3"]) == ["--multirun", "seeds=3", "seed=42,43,44"]
    assert expand_seeds(["-m", "seed=7", "seeds=2"]) == ["-m", "seeds=2", "seed=7,8"]
    # a preset's own seed is the start (sg_opt_bert: --seed 1)
    assert expand_seeds(["experiment=ablation_sg_opt_loss", "seeds=2"])[-1] == "seed=1,2"


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["seeds=0"], "seeds: expected a whole number >= 1"), (["seeds=two"], "seeds: expected a whole number"),
     (["seeds=3", "seed=1,2"], "seeds: seed=1,2 already lists the seeds"),
     (["seeds=2", "train.resume=outputs/runs/x"], "seeds: train.resume continues one run")],
)
def test_rejected_with_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        expand_seeds(argv)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("experiment", ABLATIONS)
def test_every_ablation_preset_takes_seeds(experiment: str, data_dir: Path, tiny_bert: Path) -> None:
    """Every point gets N jobs that differ by their seed alone, and each job's config is valid."""
    plain = sweep_jobs(experiment)
    jobs = sweep_jobs(experiment, _extra([f"experiment={experiment}", "seeds=3"]))
    assert len(jobs) == 3 * len(plain)
    by_point: dict[tuple[str, ...], list[str]] = {}
    for job in jobs:
        point = tuple(a for a in job if not a.startswith("seed="))
        by_point.setdefault(point, []).extend(a for a in job if a.startswith("seed="))
    assert len(by_point) == len(plain) and all(len(set(seeds)) == 3 for seeds in by_point.values())
    for job in (jobs[0], jobs[-1]):
        validate(job_config(job, data_dir, tiny_bert), job)


def test_rejected_where_it_cannot_act(data_dir: Path, tiny_bert: Path) -> None:
    """mode=eval scores a fixed encoder: the seed does not act, so seeds=N is rejected naming ``seeds``."""
    argv = ["mode=eval", f"model.name_or_path={tiny_bert}", "seeds=3"]
    job = ["mode=eval", f"model.name_or_path={tiny_bert}", "seeds=3", "seed=42"]
    with pytest.raises(ConfigError, match=r"^seeds: has no effect on this run: mode=eval"):
        validate(job_config(job, data_dir, tiny_bert), job)
    result = subprocess.run([sys.executable, "-m", "cl_bench.commands.cli", *argv, "logger.enabled=false"],
                            capture_output=True, text=True, env=cli_env(data_dir), timeout=300)
    assert result.returncode != 0
    assert "seeds: has no effect on this run" in result.stderr


def test_the_grid_presets_are_found() -> None:
    assert {"ablation_dropout", "ablation_sg_opt_loss", "augmentation_comparison", "cpu_repro"} <= set(ABLATIONS)


@pytest.mark.parametrize("experiment", ABLATIONS)
def test_every_ablation_preset_says_how_many_seeds_its_paper_used(experiment: str) -> None:
    """A ``# Seeds:`` comment in the preset's header gives the paper's number of runs per point and the
    ``seeds=N`` command for replicates."""
    header = (CONF_DIR / "experiment" / f"{experiment}.yaml").read_text().split("\ndefaults:")[0]
    assert "# Seeds:" in header, experiment
    seeds = header.split("# Seeds:", 1)[1]
    assert re.search(r"\b(one|\d+) runs?\b", seeds), (experiment, seeds[:200])
    assert f"experiment={experiment} seeds=" in " ".join(seeds.replace("#", " ").split()), experiment
