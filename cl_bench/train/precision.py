"""``train.precision``: the autocast dtype on a device and its context, as the Trainer applies them.

A module of its own (torch only) so that what measures the Trainer's step (``benchmarks/bench_train_step.py``)
applies the same autocast without importing the loop's Hydra, OmegaConf and MLflow dependencies.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from cl_bench.models.inference import resolve_precision


def autocast_dtype(precision: str, device: torch.device, iterating: bool = False) -> torch.dtype | None:
    """The autocast dtype for ``train.precision`` (None = fp32).

    ``auto`` is bf16 (fp16 where bf16 is missing) on CUDA, bf16 on a CPU with bf16 units when ``iterating``
    (``eval.sample_pairs`` set, ``eval=iterate``: :data:`cl_bench.models.inference.AUTO_CPU_ITERATING_PRECISION`,
    the dev figures measured within 0.05 of fp32), and fp32 elsewhere; ``bf16`` also runs on
    CPUs, where autocast's bf16 matrix products use the AVX512_BF16/AMX units when the CPU has them.
    ``fp16_cuda`` is fp16 with loss scaling on CUDA, as the official ``--fp16`` runs (HF Trainer's mixed
    precision), and fp32 elsewhere: what a preset of such a run uses, so that it still runs on a CPU.

    Raises:
        ValueError: ``fp16`` on a device other than CUDA (no loss scaling there).
    """
    if precision == "auto" and iterating and device.type == "cpu":
        return torch.bfloat16 if resolve_precision("auto", device, iterating=True) == "bf16" else None
    if precision == "fp32" or (precision in ("auto", "fp16_cuda") and device.type != "cuda"):
        return None
    if precision == "fp16_cuda":
        return torch.float16
    if precision == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if precision == "fp16" and device.type != "cuda":
        raise ValueError(f"train.precision: fp16 needs a CUDA device, got {device}; use bf16 or fp32")
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[Any]:
    """Autocast to ``dtype`` on ``device`` (a no-op context for fp32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
