"""``eval.precision=auto`` (the default, issue 37): bf16 on a CUDA GPU with bf16 units, fp32 on a CPU (and an
older GPU, and ONNX Runtime), so CPU figures are those of ``fp32``; ``tf32`` is a CUDA-only value."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from cl_bench.eval.suite import encoding_flags
from cl_bench.models import inference
from cl_bench.models.encoder import build_encoder
from cl_bench.models.inference import (
    AUTO_CUDA_PRECISION,
    EncodingSettings,
    InferenceConfigError,
    check_inference_options,
    encoding,
    resolve_precision,
)


def test_auto_resolves_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_precision("auto", "cpu") == "fp32"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert resolve_precision("auto", "cuda") == AUTO_CUDA_PRECISION == "bf16"
    assert resolve_precision("auto", "cuda", backend="onnx") == "fp32"  # ONNX Runtime runs fp32 only
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert resolve_precision("auto", "cuda:0") == "fp32"  # no bf16 units before Ampere
    for explicit in ("fp32", "bf16", "tf32"):
        assert resolve_precision(explicit, "cpu") == explicit


def test_auto_is_the_cpus_bf16_when_iterating_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 50: on a CPU with bf16 units, auto (eval and train) is bf16 for iterating (eval.sample_pairs set), fp32
    for the full protocol, fp32 with ONNX Runtime, and fp32 on a CPU without the units."""
    from cl_bench.train.precision import autocast_dtype

    monkeypatch.setattr(inference, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert inference.AUTO_CPU_ITERATING_PRECISION == "bf16"
    assert resolve_precision("auto", "cpu", iterating=True) == "bf16"
    assert resolve_precision("auto", "cpu") == "fp32" and resolve_precision("fp32", "cpu", iterating=True) == "fp32"
    assert resolve_precision("auto", "cpu", backend="onnx", iterating=True) == "fp32"
    cpu = torch.device("cpu")
    assert autocast_dtype("auto", cpu, iterating=True) is torch.bfloat16
    assert autocast_dtype("auto", cpu) is None and autocast_dtype("fp32", cpu, iterating=True) is None
    monkeypatch.setattr(inference, "cpu_flags", lambda: frozenset({"avx512f", "avx2"}))
    assert resolve_precision("auto", "cpu", iterating=True) == "fp32"
    assert autocast_dtype("auto", cpu, iterating=True) is None


def test_iterating_evaluations_encode_in_bf16_on_such_a_cpu(
        tiny_bert: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampled final evaluation (eval_bf16 recorded) and the sampled dev evaluation compute in bf16 under auto;
    the full protocol's stays fp32 (no flag)."""
    from cl_bench.eval import EvalOptions, evaluate, evaluate_dev

    monkeypatch.setattr(inference, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    options = EvalOptions(backend="torch", cache=False, align_uniform=False, anisotropy=False)
    assert evaluate(encoder, data_dir, ["stsb"], dataclasses.replace(options, sample_pairs=20))["eval_bf16"] == 1.0
    assert "eval_bf16" not in evaluate(encoder, data_dir, ["stsb"], options)
    precisions: list[str] = []
    original = encoder._encode_distinct

    def recording(unique, batch_size, backend, settings):  # noqa: ANN001, ANN202
        precisions.append(resolve_precision(settings.precision, encoder.device, backend, settings.iterating))
        return original(unique, batch_size, backend, settings)

    monkeypatch.setattr(encoder, "_encode_distinct", recording)
    evaluate_dev(encoder, data_dir, sample_pairs=20, align_uniform=False, anisotropy=False)
    evaluate_dev(encoder, data_dir, align_uniform=False, anisotropy=False)
    assert precisions == ["bf16", "fp32"]


def test_auto_and_tf32_are_checked_as_values(monkeypatch: pytest.MonkeyPatch) -> None:
    check_inference_options("torch", "auto", "cpu")
    check_inference_options("onnx" if inference.onnxruntime_available() else "torch", "auto", "cpu")
    with pytest.raises(InferenceConfigError, match=r"^eval\.precision: tf32 is a CUDA precision, not available on cpu"):
        check_inference_options("torch", "tf32", "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))
    with pytest.raises(InferenceConfigError, match=r"^eval\.precision: tf32 needs CUDA compute capability >= 8\.0"):
        check_inference_options("torch", "tf32", "cuda")
    with pytest.raises(InferenceConfigError, match=r"^eval\.precision: unknown 'fp8'; valid: auto, fp32, bf16, tf32"):
        check_inference_options("torch", "fp8", "cpu")


def test_auto_on_cpu_encodes_as_fp32_and_is_flagged_so(tiny_bert: Path) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    sentences = ["a dog plays in the park.", "the man plays the guitar.", "a cat."]
    with encoding(EncodingSettings("torch", "fp32")) as fp32:
        reference = encoder.encode(sentences, batch_size=2)
    with encoding(EncodingSettings("torch", "auto")) as auto:
        resolved = encoder.encode(sentences, batch_size=2)
    assert np.array_equal(reference, resolved)
    assert auto.precisions_used == fp32.precisions_used == {"fp32"}
    assert encoding_flags(auto) == {}
    assert EncodingSettings().precision == "auto"  # outside any context (the dev evaluations) too


def test_matmul_precision_tf32_switches_are_restored() -> None:
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    with inference.matmul_precision("tf32", torch.device("cuda")):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    flags = encoding_flags(EncodingSettings(precisions_used={"bf16", "tf32"}))
    assert flags == {"eval_bf16": 1.0, "eval_tf32": 1.0}


def test_gpu_batches_are_sized_by_tokens() -> None:
    from cl_bench.models.encoder import GPU_TOKENS_PER_SENTENCE, token_batches

    lengths = [4] * 300 + [60] * 10 + [200] * 40
    batches = token_batches(list(range(len(lengths))), lengths, batch_size=16)
    assert [i for batch in batches for i in batch] == list(range(len(lengths)))  # order kept, nothing lost
    budget = 16 * GPU_TOKENS_PER_SENTENCE
    assert all(len(b) >= 16 or b is batches[-1] for b in batches)
    assert all(len(b) * max(lengths[i] for i in b) <= budget or len(b) == 16 for b in batches)
    assert len(batches[0]) == 8 * 16  # short sentences: up to 8x the sentence batch


def test_prefetched_pads_ahead_on_a_thread_and_reraises() -> None:
    from cl_bench.models.encoder import prefetched

    assert list(prefetched([1, 2, 3], lambda x: x * 10, background=True)) == [(1, 10), (2, 20), (3, 30)]
    assert list(prefetched([1, 2], lambda x: -x, background=False)) == [(1, -1), (2, -2)]

    def broken(x: int) -> int:
        raise ValueError(f"bad {x}")

    with pytest.raises(ValueError, match="bad 1"):
        list(prefetched([1, 2], broken, background=True))
    early = prefetched(list(range(100)), lambda x: x, background=True)
    assert next(early) == (0, 0)
    early.close()  # a consumer that stops early leaves no thread blocked


def test_token_ids_are_kept_between_evaluations_and_jobs(tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-training dev evaluations tokenise their dev sets once (the process-wide memo), the next job of a sweep
    (a new encoder, same tokenizer) reuses them, and a changed list is tokenised anew."""
    import cl_bench.models.encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_TOKEN_MEMO", encoder_module.OrderedDict())
    calls: list[int] = []
    original = encoder_module.SentenceEncoder._tokenize_unpadded

    def counting(self, sentences):  # noqa: ANN001, ANN202
        calls.append(len(sentences))
        return original(self, sentences)

    monkeypatch.setattr(encoder_module.SentenceEncoder, "_tokenize_unpadded", counting)
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    dev = ["a dog plays.", "a man sings a song."]
    first = encoder.encode(dev, batch_size=8)
    assert np.array_equal(encoder.encode(dev, batch_size=8), first) and calls == [2]
    next_job = build_encoder(str(tiny_bert), pooler="cls", fresh_mlp=False)
    next_job.encode(dev, batch_size=8)
    assert calls == [2]
    encoder.encode(dev + ["a third sentence."], batch_size=8)
    assert calls == [2, 3]


@pytest.mark.parametrize("prompt", [None, 'This sentence : "[X]" means [MASK].'])
def test_gpu_batching_run_on_cpu_gives_the_cpu_path_embeddings(tiny_bert: Path, prompt: str | None) -> None:
    """The GPU path of ``encode`` (token-sized batches, padding on a thread, vectors gathered on the device) forced
    on the CPU: the embeddings of the sentence-count batches, in the input order (with and without a prompt)."""
    pooler = "mask" if prompt else "avg"
    encoder = build_encoder(str(tiny_bert), pooler=pooler, fresh_mlp=False, prompt=prompt or "")
    sentences = [f"sentence number {i} " + "word " * (i % 13) for i in range(90)]
    with encoding(EncodingSettings("torch", "fp32")):
        reference = encoder.encode(sentences, batch_size=8)
        encoder.device_side_batches = True
        device_side = encoder.encode(sentences, batch_size=8)
    np.testing.assert_allclose(device_side, reference, atol=1e-5)


def test_bf16_casts_each_weight_once_per_encode_call(tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37 (H200: bf16 evaluation slower than fp32): one autocast block spans the whole batch loop, so each
    weight matrix is cast to bf16 once per ``encode`` call (autocast's weight cache lives until the outermost
    block exits), not once per batch; the embeddings equal those of one ``encode`` call per batch."""
    from torch.utils._python_dispatch import TorchDispatchMode

    monkeypatch.setattr(inference, "check_bf16", lambda device: None)  # CPUs without bf16 units run it too (slowly)
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    weights = {p.data_ptr() for p in encoder.parameters()}

    class WeightCasts(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.casts: list[int] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            kwargs = kwargs or {}
            # a cast is _to_copy under no_grad, to.dtype under inference mode
            to_bf16 = (func is torch.ops.aten._to_copy.default and kwargs.get("dtype") == torch.bfloat16) or (
                func is torch.ops.aten.to.dtype and args[1] == torch.bfloat16)
            if to_bf16 and args[0].data_ptr() in weights:
                self.casts.append(args[0].data_ptr())
            return func(*args, **kwargs)

    lengths = {s: len(encoder.tokenizer(s)["input_ids"]) for s in
               ["a cat.", "a dog runs.", "the man plays the guitar.", "a woman is slicing an onion today.",
                "two men are playing chess in the park on a sunny day.", "birds."]}
    sentences = sorted(lengths, key=lengths.get)  # the encoder's own batch order: each pair below is one batch
    with encoding(EncodingSettings("torch", "bf16")):
        with WeightCasts() as counted:
            together = encoder.encode(sentences, batch_size=2)  # three batches
        per_batch = np.concatenate([encoder.encode(sentences[i : i + 2], batch_size=2) for i in range(0, 6, 2)])
    assert counted.casts and len(counted.casts) == len(set(counted.casts))  # every cast weight cast exactly once
    assert together.dtype == np.float32
    assert np.array_equal(together, per_batch)
