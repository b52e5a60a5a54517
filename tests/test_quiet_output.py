"""No noise at every load and best-checkpoint save: transformers' own progress bars are off."""

from __future__ import annotations

from pathlib import Path

import pytest

from cl_bench.models.encoder import build_encoder


def test_load_and_save_draw_no_progress_bars(tiny_bert: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="cls")
    encoder.save(tmp_path / "best_model")
    build_encoder(str(tmp_path / "best_model"), pooler="cls", fresh_mlp=False)
    out, err = capfd.readouterr()
    for bar in ("Loading weights", "Writing model shards", "it/s]"):
        assert bar not in out + err
    from huggingface_hub.utils import are_progress_bars_disabled

    assert not are_progress_bars_disabled()  # the hub's download bars (fetching a model on first use) stay
