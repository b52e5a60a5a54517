"""The eval.backend=auto probe: one measurement per architecture whatever the dropout, no ONNX export kept unused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cl_bench.models import encoder as encoder_module
from cl_bench.models import inference
from cl_bench.models.encoder import build_encoder
from cl_bench.models.onnx_backend import ONNX_SUBDIR


def test_probe_key_ignores_dropout_and_torch_choice_keeps_no_export(
        tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inference, "_AUTO_CHOICES", {})
    seen: list[str] = []
    real = inference.measured_auto_choice

    def record(architecture: str, folder: Path, measure):  # noqa: ANN001, ANN202
        seen.append(architecture)

        def torch_wins() -> dict[str, float]:
            timings = measure()  # the real probe: exports and times ONNX Runtime
            return {**timings, "torch": 0.0, "onnx": 1.0}
        return real(architecture, folder, torch_wins)

    monkeypatch.setattr(encoder_module, "measured_auto_choice", record)
    sentences = [f"sentence number {i} of the probe" for i in range(20)]
    for dropout in (0.1, 0.3):
        encoder = build_encoder(str(tiny_bert), pooler="avg", dropout=dropout, fresh_mlp=False)
        with inference.encoding(inference.EncodingSettings("auto", "fp32", cache_dir=tmp_path)) as settings:
            encoder.encode(sentences, batch_size=8)
        assert settings.backends_used == {"torch"}
    assert len(seen) == 2 and seen[0] == seen[1]  # same key: measured once
    assert len(list((tmp_path / inference.AUTO_SUBDIR).glob("*.json"))) == 1
    assert not list((tmp_path / ONNX_SUBDIR).glob("*.onnx"))  # torch chosen: the probe's export is gone
