"""Evaluation on decoders and LoRA checkpoints (issue 26, item 5): STS, SentEval transfer and an MTEB STS task
score a tiny random Llama (a plain Hugging Face folder) and a tiny Qwen2 LoRA checkpoint (adapters + base) the
way ``cl-bench mode=eval`` does (preflight, the encoder ``mode=eval`` builds, ``evaluate_encoder``), with
``eval.backend=auto`` choosing torch: ONNX export does not apply to them."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import cli_env
from hydra import compose, initialize_config_dir
from tiny_decoders import build_tiny_decoder

from cl_bench.commands.job import evaluate_encoder
from cl_bench.config import preflight, typed_specs, use_recorded_pooling
from cl_bench.config.catalog import CONF_DIR
from cl_bench.models.decoders import BackboneOptions
from cl_bench.models.encoder import SentenceEncoder, build_encoder

#: cl-bench's STS16, a transfer task of each classifier shape (binary, 6 classes, pairs) and mteb's STS16
#: (the same sentences: eval.cache serves mteb's encodings, so only the task code runs twice)
TASKS = ["sts16", "cr", "trec", "mrpc", "mteb:STS16"]
KEYS = ("sts16", "cr", "trec", "mrpc", "mteb_STS16")


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def eval_root(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real STS data (cl-bench's tasks and mteb's local copies) beside a small SentEval transfer fixture."""
    from conftest import write_transfer_fixture

    fixture = write_transfer_fixture(tmp_path_factory.mktemp("transfer_fixture"))
    root = tmp_path_factory.mktemp("eval_root")
    (root / "sts").symlink_to(data_dir / "sts")
    (root / "transfer").symlink_to(fixture / "transfer")
    return root


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny Llama folder as saved by Hugging Face, and a tiny Qwen2 LoRA checkpoint as cl-bench saves one."""
    root = tmp_path_factory.mktemp("tiny_decoders_eval")
    llama = build_tiny_decoder("llama", root / "llama")
    qwen2 = build_tiny_decoder("qwen2", root / "qwen2")
    encoder = build_encoder(str(qwen2), pooler="last_token",
                            options=BackboneOptions(lora_r=4, lora_alpha=8, lora_dropout=0.0)).eval()
    torch.manual_seed(3)
    for name, param in encoder.named_parameters():
        if "lora_" in name:
            torch.nn.init.normal_(param, std=0.2)  # "trained" adapters, so that they change the scores
    encoder.save(root / "lora" / "best_model", {"step": 2})
    assert (root / "lora" / "best_model" / "adapter_config.json").is_file()
    return {"llama": llama, "qwen2": qwen2, "lora": root / "lora" / "best_model"}


def _score(model: Path, root: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[dict[str, float], set[str], SentenceEncoder]:
    """``cl-bench mode=eval`` in process: its preflight, its encoder, its evaluation; and the backends that ran."""
    import cl_bench.eval.senteval_classifier as senteval_classifier
    import cl_bench.eval.transfer as transfer

    monkeypatch.setattr(transfer, "L2_GRID", (1e-3,))  # one penalty: wiring, not the grid (test_eval_transfer)
    monkeypatch.setattr(senteval_classifier, "L2_GRID", (1e-3,))
    overrides = ["mode=eval", f"model.name_or_path={model}", "pooler=last_token", f"eval.tasks=[{','.join(TASKS)}]",
                 "eval.backend=auto", "eval.transfer_config=fast", "eval.align_uniform=false", "eval.anisotropy=false",
                 f"eval.cache_dir={run_dir.parent / 'cache'}", "eval.batch_size=64", "logger=none", f"paths.data_dir={root}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    preflight(cfg, overrides)
    use_recorded_pooling(cfg, overrides)
    encoder = build_encoder(str(model), pooler=cfg.pooler.name, fresh_mlp=False,
                            options=BackboneOptions.from_config(cfg.model, training=False),
                            mlp_only_train=bool(cfg.pooler.mlp_only_train))
    backends: list[str] = []
    original = SentenceEncoder._encode_distinct

    def spy(self: SentenceEncoder, unique: list[str], batch_size: int, backend: str, settings: object) -> np.ndarray:
        backends.append(backend)
        return original(self, unique, batch_size, backend, settings)

    monkeypatch.setattr(SentenceEncoder, "_encode_distinct", spy)
    run_dir.mkdir(parents=True)  # the run directory Hydra makes
    results = evaluate_encoder(encoder, typed_specs(cfg), run_dir)
    monkeypatch.undo()
    return results, set(backends), encoder


def test_sts_transfer_and_mteb_score_a_decoder_and_a_lora_checkpoint_with_torch(
        checkpoints: dict[str, Path], eval_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("llama", "lora"):
        results, backends, encoder = _score(checkpoints[name], eval_root, tmp_path / name, monkeypatch)
        assert backends == {"torch"}, (name, backends)  # eval.backend=auto: ONNX export does not apply
        assert "eval_onnx" not in results
        for key in KEYS:
            assert key in results and math.isfinite(results[key]), (name, key)
        assert -100 <= results["sts16"] <= 100 and 0 <= results["trec"] <= 100
        assert json.loads((tmp_path / name / "mteb" / "STS16.json").read_text())["scores"]["test"]
    # the LoRA checkpoint was scored with its adapters (not as its base model)
    base = build_encoder(str(checkpoints["qwen2"]), pooler="last_token", fresh_mlp=False).eval()
    sentences = ["a man plays the guitar", "the dog runs"]
    assert np.abs(encoder.encode(sentences) - base.encode(sentences)).max() > 1e-3


@pytest.mark.slow
def test_real_command_evaluates_a_lora_checkpoint_on_sts_transfer_and_mteb(
        checkpoints: dict[str, Path], eval_root: Path, tmp_path: Path) -> None:
    exe = shutil.which("cl-bench")
    command = [exe] if exe else [sys.executable, "-m", "cl_bench"]
    args = ["mode=eval", f"model.name_or_path={checkpoints['lora']}", "pooler=last_token",
            f"eval.tasks=[{','.join(TASKS)}]", "eval.transfer_config=fast", "eval.align_uniform=false",
            "eval.anisotropy=false", "logger=none", f"paths.data_dir={eval_root}", "hydra.run.dir=eval"]
    proc = subprocess.run([*command, *args], cwd=tmp_path, capture_output=True, text=True,
                          env=cli_env(eval_root), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    named = ("sts/sts16", "transfer/cr", "transfer/trec", "transfer/mrpc", "mteb/mteb_STS16")  # results.json's names
    assert all(math.isfinite(results[key]) for key in named) and "eval/eval_onnx" not in results
