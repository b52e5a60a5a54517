"""Paper comparisons say what differs: encoder, steps and batch beside the paper's; preset names; repeated seeds."""

from __future__ import annotations

import pandas as pd
import pytest

from cl_bench.reporting.reference_results import load_ablations
from cl_bench.reporting.report import ReportError, build_table, resolve_ablations, setting_lines


def _runs(seeds: list[int], encoder: str = "/x/all-MiniLM-L6-v2", steps: int = 8, batch: int = 16) -> pd.DataFrame:
    return pd.DataFrame([{
        "run_id": f"r{i}", "status": "FINISHED", "params.dropout": "0.1", "params.loss.tau": "0.05",
        "params.seed": str(seed), "params.model.name_or_path": encoder, "params.batch_size": str(batch),
        "metrics.steps": float(steps), "metrics.best_stsb_dev": 80.0 + i, "tags.experiment": "ablation_dropout",
    } for i, seed in enumerate(seeds)])


def test_a_small_run_against_table_3_is_flagged() -> None:
    table = build_table(_runs([1, 2]), load_ablations()["dropout"], any_experiment=True)
    lines = setting_lines(table)
    assert lines[0] == ("Setting: these runs: encoder /x/all-MiniLM-L6-v2, steps 8, batch 16; "
                        "the paper: encoder bert-base-uncased, steps 15625, batch 64.")
    assert lines[1].startswith("WARNING: encoder, steps, batch differ from the paper's run")


def test_the_papers_setting_gets_no_warning() -> None:
    table = build_table(_runs([1, 2], "/models/bert-base-uncased", 15625, 64), load_ablations()["dropout"], True)
    assert not any(line.startswith("WARNING") for line in setting_lines(table))


def test_repeated_seeds_are_one_replicate() -> None:
    table = build_table(_runs([1, 1, 2]), load_ablations()["dropout"], any_experiment=True)
    row = table.points.set_index("point").loc["p = 0.1"]
    # seed 1 ran twice (80, 81 -> 80.5), seed 2 once (82): two replicates, not three
    assert row["runs"] == 3 and row["seeds"] == 2
    assert row["mean"] == pytest.approx((80.5 + 82.0) / 2) and row["std"] == pytest.approx(pd.Series([80.5, 82.0]).std())
    assert any("p = 0.1 (3 runs, 2 distinct seeds)" in line for line in setting_lines(table))


def test_ablation_accepts_the_presets_name() -> None:
    known = load_ablations()
    assert [s.name for s in resolve_ablations(["ablation_dropout"], known)] == ["dropout"]
    assert [s.name for s in resolve_ablations(["dropout", "ablation_dropout"], known)] == ["dropout"]
    assert {s.name for s in resolve_ablations(["cpu_repro"], known)} == {"dropout", "tau"}
    with pytest.raises(ReportError, match="--ablation: unknown nope; valid: .*experiment preset: .*ablation_dropout"):
        resolve_ablations(["nope"], known)
