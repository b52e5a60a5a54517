"""PromptBERT, SNCSE and a prompted SimCSE train a few steps from all-MiniLM-L6-v2 through the real `cl-bench`
command (slow suite), evaluate, and record what acted; a saved PromptBERT checkpoint scores the same in mode=eval."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import cli_env, minilm_path

SMALL = ["data=wiki1m_head", "data.limit=64", "batch_size=8", "train.max_steps=4", "train.eval_steps=0",
         "train.progress_bar=false", "eval.tasks=[stsb]", "eval.anisotropy=false", "eval.align_uniform=false",
         "logger=none", "train.checkpoint_steps=0"]


def _cl_bench(args: list[str], data_dir: Path, cwd: Path, run: str = "run") -> dict[str, float]:
    exe = shutil.which("cl-bench")
    assert exe, "the cl-bench console script is not installed (pip install -e .)"
    proc = subprocess.run([exe, *args, f"hydra.run.dir={run}"], cwd=cwd, capture_output=True, text=True,
                          env=cli_env(data_dir), timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    results = json.loads((cwd / run / "results.json").read_text())
    assert math.isfinite(results["sts/stsb"]), results
    return results


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["experiment=promptbert_bert"],
        ["experiment=sncse_bert"],
        ["method=simcse", "pooler=avg", "model.prompt='query: '", "model.include_prompt=false"],
    ],
    ids=["promptbert", "sncse", "simcse_prompt"],
)
def test_prompt_methods_train_through_the_command(args: list[str], data_dir: Path, tmp_path: Path) -> None:
    results = _cl_bench([*args, f"model.name_or_path={minilm_path()}", *SMALL], data_dir, tmp_path)
    print(args[0], "STS-B test", results["sts/stsb"])  # noqa: T201 - the slow suite reports the figure
    meta = json.loads((tmp_path / "run" / "best_model" / "cl_bench_encoder.json").read_text())
    if args[0].startswith("experiment="):
        assert meta["pooler"] == "mask" and "[MASK]" in meta["prompt"]
        # the checkpoint scores the same in mode=eval: with the pooler and prompt it recorded, restored by mode=eval
        common = ["mode=eval", f"model.name_or_path={tmp_path / 'run' / 'best_model'}", "eval.tasks=[stsb]",
                  "eval.anisotropy=false", "eval.align_uniform=false", "logger=none"]
        recorded = _cl_bench(common, data_dir, tmp_path, run="recorded")
        assert recorded["sts/stsb"] == pytest.approx(results["sts/stsb"], abs=1e-6)
        # and given explicitly (Hydra's single-quoted string keeps the template's double quotes as they are)
        explicit = _cl_bench([*common, "pooler=mask", f"model.prompt='{meta['prompt']}'",
                              f"model.prompt_period={meta['prompt_period']}"], data_dir, tmp_path, run="explicit")
        assert explicit["sts/stsb"] == pytest.approx(results["sts/stsb"], abs=1e-6)
    else:
        assert meta["prompt"] == "query: " and meta["include_prompt"] is False
