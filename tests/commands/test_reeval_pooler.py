"""Re-evaluating a trained checkpoint scores the model that was trained: its recorded pooler is the default."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import cli_env


def _cl_bench(args: list[str], cwd: Path, data_dir: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("cl-bench")
    assert exe, "the cl-bench console script is not installed (pip install -e .)"
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, env=cli_env(data_dir), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


@pytest.mark.slow  # three cl-bench processes (~1 min each on a busy 2-core machine)
def test_reevaluation_uses_the_recorded_pooler(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    # torch for both evaluations: figures to the last digit (ONNX Runtime agrees to ~1e-6, not bit for bit)
    common = ["eval=quick", "eval.anisotropy=false", "eval.backend=torch", "logger=none", "train.progress_bar=false"]
    _cl_bench([f"model.name_or_path={tiny_bert}", "pooler=avg", "data=wiki1m_head", "data.limit=16", "batch_size=8",
               "train.max_steps=2", "train.eval_steps=2", "hydra.run.dir=run", *common], tmp_path, data_dir)
    trained = json.loads((tmp_path / "run" / "results.json").read_text())
    assert trained["pooler"] == "avg"
    best = tmp_path / "run" / "best_model"
    assert json.loads((best / "cl_bench_encoder.json").read_text())["pooler"] == "avg"

    # no pooler= given: the checkpoint's avg, the same figures to the last digit
    proc = _cl_bench(["mode=eval", f"model.name_or_path={best}", "hydra.run.dir=ev", *common], tmp_path, data_dir)
    again = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert again["pooler"] == "avg" and "pooler=avg" in proc.stdout + proc.stderr
    figures = [k for k in again if k not in ("pooler", "provenance")]  # provenance: how each run was made
    assert "sts/stsb" in figures
    assert {k: again[k] for k in figures} == {k: trained[k] for k in figures}

    # an explicit other pooler is honoured, with a warning naming both
    proc = _cl_bench(["mode=eval", f"model.name_or_path={best}", "pooler=cls_before_pooler", "hydra.run.dir=ev2",
                      *common], tmp_path, data_dir)
    other = json.loads((tmp_path / "ev2" / "results.json").read_text())
    assert other["pooler"] == "cls_before_pooler" and other["sts/stsb"] != trained["sts/stsb"]
    warning = [line for line in (proc.stdout + proc.stderr).splitlines() if "trained with pooler=avg" in line]
    assert warning and "pooler=cls_before_pooler" in warning[0]


def test_reevaluation_restores_the_recorded_prompt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A [MASK]-pooled (PromptBERT) checkpoint is scored with the prompt it was trained with unless one is given."""
    from hydra import compose, initialize_config_dir

    from cl_bench.commands.cli import CONF_DIR
    from cl_bench.config import use_recorded_pooling
    from cl_bench.utils.rundir import ENCODER_META_FILE

    template = 'This sentence of "[X]" means [MASK].'
    (tmp_path / ENCODER_META_FILE).write_text(json.dumps(
        {"pooler": "mask", "prompt": template, "include_prompt": True, "prompt_period": "promptbert"}))
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        recorded = ["mode=eval", f"model.name_or_path={tmp_path}"]
        cfg = compose("config", overrides=recorded)
        given = [*recorded, "model.prompt='[X] means [MASK].'"]
        cfg_given = compose("config", overrides=given)
    use_recorded_pooling(cfg, recorded)
    assert (cfg.pooler.name, cfg.model.prompt, cfg.model.prompt_period) == ("mask", template, "promptbert")
    with caplog.at_level("WARNING"):
        use_recorded_pooling(cfg_given, given)
    assert cfg_given.model.prompt == "[X] means [MASK]." and cfg_given.model.prompt_period == "promptbert"
    assert any("model.prompt=" in r.getMessage() and template in r.getMessage() for r in caplog.records)
