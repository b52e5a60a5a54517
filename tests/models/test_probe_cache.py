"""The eval.backend=auto probe: one measurement per machine and model shape (whatever the dropout or the checkpoint's
folder), reused by a second job in the process and by a second process, which say so; an export only where the
sentences still to encode repay it; no ONNX export kept unused."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cl_bench.models import encoder as encoder_module
from cl_bench.models import inference
from cl_bench.models.encoder import build_encoder
from cl_bench.models.onnx_backend import ONNX_SUBDIR

SENTENCES = [f"sentence number {i} of the probe" for i in range(20)]


def test_probe_key_ignores_dropout_and_torch_choice_keeps_no_export(
        tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inference, "_AUTO_CHOICES", {})
    monkeypatch.setattr(encoder_module.SentenceEncoder, "AUTO_PROBE_SENTENCES", 8)
    seen: list[str] = []
    real = inference.measured_auto_choice

    def record(architecture: str, folder: Path, measure):  # noqa: ANN001, ANN202
        seen.append(architecture)

        def torch_wins() -> dict[str, float]:
            timings = measure()  # the real probe: exports and times ONNX Runtime
            return {**timings, "torch": 0.0, "onnx": 1.0}
        return real(architecture, folder, torch_wins)

    monkeypatch.setattr(encoder_module, "measured_auto_choice", record)
    for dropout in (0.1, 0.3):
        encoder = build_encoder(str(tiny_bert), pooler="avg", dropout=dropout, fresh_mlp=False)
        with inference.encoding(inference.EncodingSettings("auto", "fp32", cache_dir=tmp_path)) as settings:
            encoder.encode(SENTENCES, batch_size=8)
        assert settings.backends_used == {"torch"}
    assert len(seen) == 2 and seen[0] == seen[1]  # same key: measured once
    assert len(list((tmp_path / inference.AUTO_SUBDIR).glob("*.json"))) == 1
    assert not list((tmp_path / ONNX_SUBDIR).glob("*.onnx"))  # torch chosen: the probe's export is gone


def test_an_export_runs_only_where_the_sentences_repay_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """ONNX Runtime 1 ms/sentence faster, an export of 20 s: 600 sentences (a sampled evaluation) stay on torch,
    50,000 (the STS suite) or an exported checkpoint take ONNX Runtime; the line says both figures."""
    probe = inference.BackendProbe("onnx", 0.003, 0.002, 20.0, tmp_path / "probe.json")
    with caplog.at_level(logging.INFO, logger="cl_bench.models.inference"):
        assert inference.backend_that_repays(probe, 600, exported=False) == "torch"
        assert "torch for 600 sentences: ONNX Runtime saves about 0.6 s on them <= its export's 20.0 s" in caplog.text
        assert inference.backend_that_repays(probe, 50_000, exported=False) == "onnx"
        assert "saves about 50.0 s on them > its export's 20.0 s" in caplog.text
        assert inference.backend_that_repays(probe, 600, exported=True) == "onnx"
    slower = inference.BackendProbe("torch", 0.002, 0.003, 1.0, tmp_path / "probe.json")
    assert inference.backend_that_repays(slower, 10**6, exported=True) == "torch"


def test_a_checkpoint_is_not_exported_for_a_few_hundred_sentences(
        tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that found ONNX Runtime faster (remembered), a new checkpoint, 20 sentences: no export is made."""
    monkeypatch.setattr(inference, "_AUTO_CHOICES", {})
    monkeypatch.setattr(encoder_module.SentenceEncoder, "AUTO_PROBE_SENTENCES", 8)
    monkeypatch.setattr(encoder_module, "time_backends", lambda encode: {
        "torch": 8 * 0.003, "onnx": 8 * 0.002, "max_cosine_distance": 0.0, "sentences": 8})
    monkeypatch.setattr(encoder_module, "export_seconds", lambda *args: 20.0)  # measured: as a real model's export
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    with inference.encoding(inference.EncodingSettings("auto", "fp32", cache_dir=tmp_path)) as settings:
        encoder.encode(SENTENCES, batch_size=8)
    assert settings.backends_used == {"torch"}
    assert not list((tmp_path / ONNX_SUBDIR).glob("*.onnx"))


_SECOND_PROCESS = """
import logging, sys, torch
logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
torch.set_num_threads(int(sys.argv[3]))
from cl_bench.models import encoder as encoder_module
from cl_bench.models import inference
from cl_bench.models.encoder import build_encoder
encoder_module.SentenceEncoder.AUTO_PROBE_SENTENCES = 8
encoder = build_encoder(sys.argv[1], pooler="avg", dropout=0.2, fresh_mlp=False)
with inference.encoding(inference.EncodingSettings("auto", "fp32", cache_dir=sys.argv[2])):
    encoder.encode([f"sentence number {i} of the probe" for i in range(20)], batch_size=8)
"""


def test_a_second_job_and_a_second_process_find_the_probe_and_say_so(
        tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(inference, "_AUTO_CHOICES", {})
    monkeypatch.setattr(encoder_module.SentenceEncoder, "AUTO_PROBE_SENTENCES", 8)
    cache = tmp_path / "cache"
    first = build_encoder(str(tiny_bert), pooler="avg", dropout=0.1, fresh_mlp=False)
    with caplog.at_level(logging.INFO, logger="cl_bench.models"):
        with inference.encoding(inference.EncodingSettings("auto", "fp32", cache_dir=cache)):
            first.encode(SENTENCES, batch_size=8)
        assert "timing torch and ONNX Runtime on 8 sentences" in caplog.text and "measured now" in caplog.text
        caplog.clear()
        # the next job of a sweep: a checkpoint in another folder (another _name_or_path), another dropout
        checkpoint = tmp_path / "job1" / "best_model"
        first.backbone.save_pretrained(checkpoint)
        first.tokenizer.save_pretrained(checkpoint)
        second = build_encoder(str(checkpoint), pooler="avg", dropout=0.3, fresh_mlp=False)
        with inference.encoding(inference.EncodingSettings("auto", "fp32", cache_dir=cache)):
            second.encode(SENTENCES, batch_size=8)
    assert "timing torch" not in caplog.text and "probe reused (this process)" in caplog.text
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", _SECOND_PROCESS, str(checkpoint), str(cache),
                           str(torch.get_num_threads())], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "timing torch" not in out
    assert "the probe of this machine and model shape reused from" in out and "probe reused (file)" in out
    assert len(list((cache / inference.AUTO_SUBDIR).glob("*.json"))) == 1
