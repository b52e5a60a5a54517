"""MTEB extra: STS tasks from the data root's local copies, through mteb, on cl-bench encoders."""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from sklearn.metrics.pairwise import paired_cosine_distances

from cl_bench.eval import mteb as em
from cl_bench.eval.registry import split_tasks
from cl_bench.models import inference
from cl_bench.models.encoder import SentenceEncoder, build_encoder
from cl_bench.models.inference import encoding_settings


class HashedBagOfWords:
    """A cheap deterministic encoder: word counts hashed into 64 buckets."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(sentences), 64), dtype=np.float32)
        for row, sentence in enumerate(sentences):
            for word in sentence.split():
                out[row, zlib.crc32(word.encode()) % 64] += 1.0
        return out + 1e-3  # no all-zero row (cosine undefined)


def _own_spearman(encoder: object, s1: list[str], s2: list[str], gold: list[float], batch_size: int) -> float:
    """Cosine Spearman x 100 computed here. Cosine as 1 - sklearn's paired cosine distance, the float32
    arithmetic mteb uses: tied pairs (e.g. identical sentences) then rank identically."""
    a, b = encoder.encode(s1, batch_size), encoder.encode(s2, batch_size)
    return float(spearmanr(1 - paired_cosine_distances(a, b), gold).statistic) * 100


def test_local_copies_have_mtebs_pair_counts(data_dir: Path) -> None:
    import mteb

    for name in em.LOCAL_STS_TASKS:
        task = mteb.get_task(name)
        (split,) = task.metadata.eval_splits
        s1, s2, scores = em.local_sts_pairs(data_dir, name)
        assert len(s1) == len(s2) == len(scores) == task.metadata.descriptive_stats[split]["num_samples"], name
    assert len(em.local_sts_pairs(data_dir, "SICK-R")[2]) == 9927  # all of SICK, as mteb/sickr-sts


def test_mteb_sts_tasks_on_local_copies_match_an_independent_spearman(data_dir: Path, tmp_path: Path) -> None:
    encoder = HashedBagOfWords()
    names = ["mteb:STS12", "mteb:STS13", "mteb:STS14", "mteb:STS15", "mteb:STS16", "mteb:STSBenchmark", "mteb:SICK-R"]
    results = em.run_mteb(encoder, names, tmp_path, data_dir, batch_size=256)
    assert sorted(results) == sorted(f"mteb_{n[5:]}" for n in names)
    for name in names:
        s1, s2, gold = em.local_sts_pairs(data_dir, name)
        assert results[f"mteb_{name[5:]}"] == pytest.approx(_own_spearman(encoder, s1, s2, gold, 256), abs=1e-6), name
        record = json.loads((tmp_path / "mteb" / f"{name[5:]}.json").read_text())
        assert record["data_source"] == em.LOCAL_SOURCE
        assert record["scores"]["test"][0]["cosine_spearman"] * 100 == pytest.approx(results[f"mteb_{name[5:]}"])
    assert 0 < results["mteb_STS12"] < 100 and results["mteb_SICK-R"] != results["mteb_STS12"]


class Recording:
    """Passes calls through to an encoder and keeps what it was given and what it returned."""

    def __init__(self, encoder: object) -> None:
        self.encoder = encoder
        self.calls: list[tuple[list[str], np.ndarray]] = []

    def encode(self, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
        out = self.encoder.encode(sentences, batch_size)
        self.calls.append((list(sentences), out))
        return out


def test_mteb_runs_the_same_sentence_encoder_and_pooler(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    s1, s2, gold = em.local_sts_pairs(data_dir, "STS16")
    results = {}
    for pooler in ("avg", "cls_before_pooler"):
        encoder = build_encoder(str(tiny_bert), pooler=pooler)
        encoder.tokenizer.model_max_length = 64  # the tiny BERT has 128 positions; some STS16 texts are longer
        recording = Recording(encoder)
        (score,) = em.run_mteb(recording, ["mteb:STS16"], tmp_path / pooler, data_dir, batch_size=128).values()
        # mteb encoded exactly SentEval's first and second sentences with this encoder...
        (first, a), (second, b) = recording.calls
        assert first == s1 and second == s2
        # ...and its main score is their cosine Spearman x 100.
        cosine = 1 - paired_cosine_distances(a, b)
        assert score == pytest.approx(float(spearmanr(cosine, gold).statistic) * 100, abs=1e-6)
        results[pooler] = score
    assert results["avg"] != pytest.approx(results["cls_before_pooler"], abs=1e-3)  # the pooler matters


def test_mteb_tasks_encode_with_eval_backend_precision_and_cache(
    tiny_bert: Path, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.set_num_threads(1)
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    encoder.tokenizer.model_max_length = 64  # the tiny BERT has 128 positions; some STS16 texts are longer
    forward_passes: list[str] = []
    original = SentenceEncoder._encode_distinct

    def counting(self: SentenceEncoder, unique: list[str], batch_size: int, backend: str, settings: object) -> np.ndarray:
        forward_passes.append(backend)
        return original(self, unique, batch_size, backend, settings)

    monkeypatch.setattr(SentenceEncoder, "_encode_distinct", counting)
    # bf16 is refused on CPUs without bf16 units (test_encoding_backends checks that); here it must act anywhere
    monkeypatch.setattr(inference, "cpu_flags", lambda: frozenset({"amx_bf16"}))
    cache = tmp_path / "cache"
    scores = {}
    for backend, precision in (("torch", "fp32"), ("onnx", "fp32"), ("torch", "bf16")):
        settings = encoding_settings(backend, precision, cache=True, cache_dir=str(cache))
        scores[backend, precision] = em.run_mteb(encoder, ["mteb:STS16"], tmp_path / backend, data_dir, 128, settings=settings)
        assert settings.backends_used == {backend}  # mteb's encoding ran in the evaluation's context
    # each option acted: ONNX Runtime and bf16 computed their own figures, flagged as such
    assert forward_passes == ["torch", "torch", "onnx", "onnx", "torch", "torch"]  # first and second sentences
    assert len(list((cache / "onnx").glob("*.onnx"))) == 1
    assert "eval_onnx" not in scores["torch", "fp32"] and scores["onnx", "fp32"]["eval_onnx"] == 1.0
    assert scores["torch", "bf16"]["eval_bf16"] == 1.0
    fp32, onnx, bf16 = (scores[key]["mteb_STS16"] for key in (("torch", "fp32"), ("onnx", "fp32"), ("torch", "bf16")))
    assert onnx == pytest.approx(fp32, abs=0.01) and bf16 == pytest.approx(fp32, abs=1.0) and bf16 != fp32
    # eval.cache: the same model scored again is served from the cache; eval.cache=false encodes again
    again = em.run_mteb(encoder, ["mteb:STS16"], tmp_path / "again", data_dir, 128,
                        settings=encoding_settings("onnx", "fp32", cache=True, cache_dir=str(cache)))
    assert len(forward_passes) == 6 and again == scores["onnx", "fp32"]
    em.run_mteb(encoder, ["mteb:STS16"], tmp_path / "uncached", data_dir, 128,
                settings=encoding_settings("onnx", "fp32", cache=False, cache_dir=str(cache)))
    assert len(forward_passes) == 8


def test_encoding_options_of_an_mteb_only_evaluation_are_checked_before_any_model_loads(
    tiny_bert: Path, data_dir: Path
) -> None:
    from hydra import compose, initialize_config_dir

    from cl_bench.commands.cli import CONF_DIR
    from cl_bench.config import ConfigError, preflight

    def check(*extra: str) -> None:
        overrides = ["mode=eval", f"model.name_or_path={tiny_bert}", "pooler=avg", f"paths.data_dir={data_dir}",
                     "eval.tasks=[mteb:STS16]", *extra]
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            preflight(compose("config", overrides=overrides), overrides)

    check("eval.backend=onnx", "eval.precision=fp32", "eval.cache=false")
    for override, message in (("eval.backend=tpu", "eval.backend: unknown 'tpu'"),
                              ("eval.precision=fp8", "eval.precision: unknown 'fp8'"),
                              ("eval.cache_size_gb=0", "eval.cache_size_gb: must be > 0"),
                              # what mteb's tasks never read: post-processing and the STS-B geometry
                              ("eval.postprocess=whitening", "eval.postprocess: .*only cl-bench's own tasks use it"),
                              ("eval.anisotropy=false", "eval.anisotropy: .*only cl-bench's own tasks use it")):
        with pytest.raises(ConfigError, match=message):
            check(override)


def test_unavailable_data_and_bad_names_are_named(tmp_path: Path) -> None:
    empty_root = tmp_path / "empty"
    empty_root.mkdir()
    encoder = HashedBagOfWords()
    # Offline (tests run with HF_HUB_OFFLINE=1): no local copy and no hub -> a clear message, nothing encoded.
    with pytest.raises(em.MTEBUnavailableError) as info:
        em.run_mteb(encoder, ["mteb:STS16"], tmp_path, empty_root)
    message = str(info.value)
    assert message.startswith("mteb:STS16: data not available: no local copy (")
    assert "STS.input.answer-answer.txt" in message and "cl-bench-data download --only senteval" in message
    assert "'mteb/sts16-sts'" in message and "HF_HUB_OFFLINE" in message
    with pytest.raises(em.MTEBUnavailableError, match=r"mteb:Banking77Classification: data not available: no local "
                       r"copy \(the data root provides only STS12, .*SICK-R\), and mteb could not load 'mteb/banking77'"):
        em.run_mteb(encoder, ["Banking77Classification"], tmp_path, empty_root)
    assert encoder.calls == 0
    with pytest.raises(ValueError, match=r"eval.tasks: unknown MTEB task 'mteb:STS99' \(.*Did you mean"):
        em.check_mteb_tasks(["mteb:STS99"])
    em.check_mteb_tasks(["mteb:STS12", "SICK-R"])
    assert split_tasks(["sts", "mteb:STS12", "mr"]) == (["sts", "mr"], ["STS12"])


def test_missing_extra_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mteb", None)  # as if mteb were not installed
    with pytest.raises(ValueError, match=r"pip install 'cl-bench\[mteb\]'"):
        em.check_mteb_tasks(["mteb:STS12"])


def test_adapter_imports_neither_train_nor_methods() -> None:
    source = Path(em.__file__).read_text()
    assert "cl_bench.train" not in source.replace("``cl_bench.train``", "")
    assert "cl_bench.methods" not in source.replace("``cl_bench.methods``", "")
