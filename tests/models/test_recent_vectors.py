"""Iterating (eval.sample_pairs set): the sentences the last encode of the same weights and settings encoded are
not encoded again (the final evaluation after the last dev evaluation, issue 50); anything else is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cl_bench.models import encoder as encoder_module
from cl_bench.models.encoder import build_encoder
from cl_bench.models.inference import EncodingSettings, encoding

DEV = ["a man plays a guitar", "a dog runs", "two children walk in the park", "the sky is blue"]
TEST = ["a woman reads a book", "the dog runs"]


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The sentence lists each call of ``_encode_distinct`` encoded; the memo starts empty."""
    monkeypatch.setattr(encoder_module, "_RECENT_VECTORS", {})
    calls: list[list[str]] = []
    original = encoder_module.SentenceEncoder._encode_distinct

    def counting(self, unique, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(list(unique))
        return original(self, unique, *args, **kwargs)

    monkeypatch.setattr(encoder_module.SentenceEncoder, "_encode_distinct", counting)
    return calls


def _iterating(tmp_path: Path, iterating: bool = True) -> EncodingSettings:
    return EncodingSettings("torch", "fp32", False, tmp_path, iterating=iterating)


def test_the_final_evaluation_reuses_the_dev_sample(tiny_bert: Path, tmp_path: Path, encoded: list[list[str]]) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    with encoding(_iterating(tmp_path)):
        dev = encoder.encode(DEV, batch_size=2)
        final = encoder.encode(TEST + DEV, batch_size=2)
    assert encoded == [DEV, TEST]  # only the sentences not encoded before
    np.testing.assert_array_equal(final[len(TEST):], dev)  # the dev vectors as they were
    np.testing.assert_allclose(final[: len(TEST)], encoder.encode(TEST, batch_size=2), atol=1e-6)


def test_new_weights_encode_everything_again(tiny_bert: Path, tmp_path: Path, encoded: list[list[str]]) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    with encoding(_iterating(tmp_path)):
        encoder.encode(DEV, batch_size=2)
        with torch.no_grad():
            next(encoder.parameters()).add_(1e-3)  # an optimizer step
        encoder.encode(DEV, batch_size=2)
    assert encoded == [DEV, DEV]


def test_the_full_protocol_encodes_everything(tiny_bert: Path, tmp_path: Path, encoded: list[list[str]]) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    with encoding(_iterating(tmp_path, iterating=False)):
        encoder.encode(DEV, batch_size=2)
        encoder.encode(TEST + DEV, batch_size=2)
    assert encoded == [DEV, TEST + DEV]
    assert encoder_module._RECENT_VECTORS == {}
