"""``eval.precision=auto`` (the default, issue 37): bf16 on a CUDA GPU with bf16 units, fp32 on a CPU (and an
older GPU, and ONNX Runtime), so CPU figures are those of ``fp32``; ``tf32`` is a CUDA-only value."""

from __future__ import annotations

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
