"""Encoding backends, precision and the embedding cache (cl_bench/models/inference.py, onnx_backend.py,
embedding_cache.py): ONNX Runtime equals torch for every pooler, the cache hits only on identical
weights, bf16 is refused where the hardware lacks bf16 units, and the real MiniLM scores the same STS
figures with both backends (slow)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import WORDS, minilm_path

from cl_bench.eval import EvalConfigError, EvalOptions, check_eval_config, evaluate
from cl_bench.eval.registry import TASKS, groups
from cl_bench.models import encoder as encoder_module
from cl_bench.models import inference
from cl_bench.models.encoder import SentenceEncoder, build_encoder
from cl_bench.models.inference import EncodingSettings, InferenceConfigError, encoding
from cl_bench.models.poolers import POOLERS

SENTENCES = [
    "the man plays the guitar",
    "a dog",
    "two children walking in the park with a red ball and a small blue bike",
    "the man plays the guitar",  # a duplicate: encoded once, returned twice
    *[" ".join(WORDS[i : i + 1 + i % 9]) for i in range(0, 60, 3)],
]


def _settings(tmp_path: Path, backend: str = "torch", precision: str = "fp32", cache: bool = False) -> EncodingSettings:
    return EncodingSettings(backend, precision, cache, tmp_path / "cache")


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache folder for the pooler tests: the tiny BERT is exported once for all of them."""
    return tmp_path_factory.mktemp("shared")


@pytest.mark.parametrize("pooler", POOLERS)
def test_onnx_runtime_embeddings_equal_torch_for_every_pooler(pooler: str, tiny_bert: Path, shared_cache: Path) -> None:
    encoder = build_encoder(str(tiny_bert), pooler=pooler, first_layer=0, fresh_mlp=False)
    reference = encoder.encode(SENTENCES, batch_size=5)  # outside any context: torch, fp32
    with encoding(_settings(shared_cache, "onnx")) as settings:
        # batch size 1 (no padding), 5 (mixed lengths), all at once
        for batch_size in (1, 5, len(SENTENCES)):
            onnx = encoder.encode(SENTENCES, batch_size=batch_size)
            assert onnx.shape == reference.shape and onnx.dtype == np.float32
            np.testing.assert_allclose(onnx, reference, atol=2e-5, rtol=1e-4)
    assert settings.backends_used == {"onnx"}
    assert len(list((shared_cache / "cache" / "onnx").glob("*.onnx"))) == 1  # exported once, reused


def test_onnx_export_follows_the_weights(tiny_bert: Path, tmp_path: Path) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    with encoding(_settings(tmp_path, "onnx")):
        before = encoder.encode(SENTENCES[:3])
        with torch.no_grad():
            encoder.backbone.encoder.layer[0].output.dense.weight.mul_(1.5)
        after = encoder.encode(SENTENCES[:3])
    np.testing.assert_allclose(after, encoder.encode(SENTENCES[:3]), atol=2e-5, rtol=1e-4)
    assert not np.allclose(before, after, atol=1e-3)
    assert len(list((tmp_path / "cache" / "onnx").glob("*.onnx"))) == 2


def test_cache_hits_on_the_same_weights_and_misses_after_one_weight_changes(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    forward_passes = []
    original = SentenceEncoder._encode_distinct

    def counting(self: SentenceEncoder, *args: object, **kwargs: object) -> np.ndarray:
        forward_passes.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SentenceEncoder, "_encode_distinct", counting)
    with encoding(_settings(tmp_path, cache=True)):
        first = encoder.encode(SENTENCES)
        again = encoder.encode(SENTENCES)
        assert len(forward_passes) == 1  # served from the cache
        np.testing.assert_array_equal(first, again)
        with torch.no_grad():
            encoder.backbone.embeddings.word_embeddings.weight[2, 3] += 1e-3  # one weight ([CLS]: in every input)
        changed = encoder.encode(SENTENCES)
        assert len(forward_passes) == 2  # a miss: never the stale vectors
        assert not np.array_equal(changed, first)
        encoder.pooler = "avg_top2"
        encoder.encode(SENTENCES)
        assert len(forward_passes) == 3  # another pooler, another entry
    with encoding(_settings(tmp_path, cache=False)):
        encoder.encode(SENTENCES)
    assert len(forward_passes) == 4  # eval.cache=false always encodes
    assert len(list((tmp_path / "cache" / "embeddings").glob("*.npy"))) == 3


def test_no_cache_outside_an_evaluation(tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # dev evaluations during training run outside any context: torch, fp32, nothing written
    monkeypatch.setenv("CL_BENCH_CACHE", str(tmp_path / "env_cache"))
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    encoder.encode(SENTENCES)
    assert inference.current_settings() == EncodingSettings()
    assert not (tmp_path / "env_cache").exists()


def test_cache_folder_is_pruned_to_its_size_limit(tiny_bert: Path, tmp_path: Path) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    entry_bytes = 128 + 8 * encoder.hidden_size * 4  # .npy header + 8 rows of float32
    limit_gb = 2.5 * entry_bytes / 1024**3  # room for two entries
    with encoding(EncodingSettings("torch", "fp32", True, tmp_path / "cache", limit_gb)):
        for n in range(4):
            encoder.encode([f"the dog {n} {i}" for i in range(8)])
    entries = list((tmp_path / "cache" / "embeddings").glob("*.npy"))
    assert len(entries) == 2 and {p.stat().st_size for p in entries} == {entry_bytes}


def test_bf16_is_refused_without_bf16_units(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inference, "probable_eval_device", lambda: torch.device("cpu"))
    monkeypatch.setattr(inference, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    with pytest.raises(EvalConfigError, match=r"^eval\.precision: bf16 needs a CPU with avx512_bf16 or amx_bf16"):
        check_eval_config(data_dir, ["stsb"], options=EvalOptions(precision="bf16"))
    check_eval_config(data_dir, ["stsb"], options=EvalOptions(precision="fp32"))
    monkeypatch.setattr(inference, "cpu_flags", lambda: frozenset({"avx2", "amx_bf16"}))
    check_eval_config(data_dir, ["stsb"], options=EvalOptions(precision="bf16", backend="torch"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    with pytest.raises(InferenceConfigError, match=r"^eval\.precision: bf16 needs CUDA compute capability >= 8\.0"):
        inference.check_bf16(torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    inference.check_bf16(torch.device("cuda"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"backend": "tensorrt"}, r"^eval\.backend: unknown 'tensorrt'"),
        ({"precision": "fp16"}, r"^eval\.precision: unknown 'fp16'"),
        ({"backend": "onnx", "precision": "bf16"}, r"^eval\.backend: onnx runs fp32 only"),
        ({"cache_size_gb": 0}, r"^eval\.cache_size_gb: must be > 0"),
        ({"cache": "yes"}, r"^eval\.cache: must be true or false"),
    ],
)
def test_bad_encoding_options_are_one_line_errors(options: dict, message: str, data_dir: Path) -> None:
    with pytest.raises(EvalConfigError, match=message):
        check_eval_config(data_dir, ["stsb"], EvalOptions(**options))


def test_auto_picks_onnx_for_fp32_on_cpu_and_torch_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert inference.resolve_backend("auto", "fp32", cpu) == "onnx"
    assert inference.resolve_backend("auto", "bf16", cpu) == "torch"  # auto never changes numerics
    assert inference.resolve_backend("auto", "fp32", cuda) == "torch"
    assert inference.resolve_backend("torch", "fp32", cpu) == "torch"
    monkeypatch.setattr(inference, "onnxruntime_available", lambda: False)
    assert inference.resolve_backend("auto", "fp32", cpu) == "torch"


def test_evaluate_flags_onnx_and_bf16_figures(tiny_bert: Path, data_dir: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for split in ("dev", "test"):  # the first 200 pairs of the real STS-B dev and test files
        (relative,) = TASKS["stsb"].parts[split]
        lines = (data_dir / relative).read_text(encoding="utf-8").splitlines(keepends=True)
        (tmp_path / "data" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / relative).write_text("".join(lines[:200]), encoding="utf-8")
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    options = EvalOptions(align_uniform=False, anisotropy=False, cache_dir=str(tmp_path))
    torch_fp32 = evaluate(encoder, tmp_path / "data", ["stsb"], replace(options, backend="torch"))
    # auto measures both backends once per machine; make ONNX Runtime the faster one here (and forget any probe an
    # earlier test of this process made of the same tiny shape)
    monkeypatch.setattr(inference, "_AUTO_CHOICES", {})
    monkeypatch.setattr(encoder_module, "time_backends", lambda encode: {"torch": 2.0, "onnx": 1.0,
                                                                         "max_cosine_distance": 0.0, "sentences": 256})
    onnx_fp32 = evaluate(encoder, tmp_path / "data", ["stsb"], replace(options, backend="auto"))
    assert "eval_onnx" not in torch_fp32 and onnx_fp32["eval_onnx"] == 1.0
    assert abs(onnx_fp32["stsb"] - torch_fp32["stsb"]) < 0.01
    monkeypatch.setattr(inference, "cpu_flags", lambda: frozenset({"amx_bf16"}))  # runs (slowly) anywhere
    bf16 = evaluate(encoder, tmp_path / "data", ["stsb"], replace(options, backend="auto", precision="bf16"))
    assert bf16["eval_bf16"] == 1.0 and "eval_onnx" not in bf16  # auto: bf16 runs on torch


def test_auto_measures_once_per_machine_and_architecture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inference, "_AUTO_CHOICES", {})
    calls = []

    def timings(torch_s: float, onnx_s: float, distance: float):  # noqa: ANN202
        def measure() -> dict[str, float]:
            calls.append(1)
            return {"torch": torch_s, "onnx": onnx_s, "max_cosine_distance": distance, "sentences": 100.0,
                    "export_seconds": 3.0}
        return measure

    first = inference.measured_auto_choice("bert-a", tmp_path, timings(2.0, 1.0, 1e-7))
    assert first.choice == "onnx" and first.reused == "" and first.onnx_per_sentence == pytest.approx(0.01)
    again = inference.measured_auto_choice("bert-a", tmp_path, timings(1.0, 2.0, 1e-7))
    assert again.choice == "onnx" and again.reused == "this process"  # remembered
    monkeypatch.setattr(inference, "_AUTO_CHOICES", {})  # a new process reads the file
    from_file = inference.measured_auto_choice("bert-a", tmp_path, timings(1.0, 2.0, 1e-7))
    assert from_file.choice == "onnx" and from_file.reused == "file" and from_file.export_seconds == 3.0
    assert len(calls) == 1
    assert inference.measured_auto_choice("bert-b", tmp_path, timings(1.0, 2.0, 1e-7)).choice == "torch"  # torch faster
    assert inference.measured_auto_choice("bert-c", tmp_path, timings(2.0, 1.0, 1e-3)).choice == "torch"  # not identical
    assert len(calls) == 3
    record = json.loads(next((tmp_path / inference.AUTO_SUBDIR).glob("*.json")).read_text())
    assert set(record) >= {"choice", "torch", "onnx", "max_cosine_distance", "machine", "threads", "export_seconds",
                           "sentences"}


def test_auto_runs_the_backend_it_measured(tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real probe: both backends timed on the sentences being encoded; the choice is what ran."""
    monkeypatch.setattr(inference, "_AUTO_CHOICES", {})
    monkeypatch.setattr(encoder_module.SentenceEncoder, "AUTO_PROBE_SENTENCES", 16)
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    sentences = [f"sentence number {i} of the probe" for i in range(40)]
    settings = inference.EncodingSettings("auto", "fp32", cache_dir=tmp_path)
    with inference.encoding(settings):
        vectors = encoder.encode(sentences, batch_size=16)
    record = json.loads(next((tmp_path / inference.AUTO_SUBDIR).glob("*.json")).read_text())
    assert settings.backends_used == {record["choice"]}
    assert record["torch"] > 0 and record["onnx"] > 0 and record["max_cosine_distance"] < 1e-5
    assert record["export_seconds"] > 0 and record["sentences"] == 16
    with inference.encoding(inference.EncodingSettings("torch", "fp32", cache_dir=tmp_path)):
        assert np.allclose(vectors, encoder.encode(sentences, batch_size=16), atol=1e-5)


@pytest.mark.slow
def test_minilm_onnx_sts_figures_equal_torch(data_dir: Path, tmp_path: Path) -> None:
    encoder = build_encoder(str(minilm_path()), pooler="avg", fresh_mlp=False)
    options = EvalOptions(align_uniform=False, anisotropy=False, cache=False, cache_dir=str(tmp_path))
    torch_fp32 = evaluate(encoder, data_dir, ["sts"], replace(options, backend="torch"))
    onnx_fp32 = evaluate(encoder, data_dir, ["sts"], replace(options, backend="onnx"))
    differences = {task: abs(onnx_fp32[task] - torch_fp32[task]) for task in groups()["sts"]}
    assert max(differences.values()) <= 0.01, differences
    assert onnx_fp32["eval_onnx"] == 1.0
