"""``train.compile``: the trained encoders' backbones through ``torch.compile``, on bucketed sequence lengths.

A compiled graph is specialised to its input shapes. Batches padded to their longest sentence have a new
length almost every step, so the prepared batches are padded further, to the smallest of a few *length
buckets* (:func:`length_buckets`: four lengths up to ``model.max_length``, multiples of 8), and the backbone
is compiled for static shapes: one graph per bucket (and per last partial batch), compiled once each. The
padding is masked as before (attention mask 0, pad token ids), so a bucketed batch encodes as the unpadded
one up to floating-point rounding (``tests/train/test_train_compile.py``).

On CUDA the mode is ``reduce-overhead``: inductor's kernels replayed as CUDA graphs (the forward and the
backward pass each become one launch), which removes the per-kernel launch cost that bounds a bert-base step
at small batches. Elsewhere the default mode (inductor's fused kernels, no graphs).

Only the training forward pass runs compiled (:attr:`SentenceEncoder.compiled_backbone` is used in training
mode); evaluation encodes with the eager module, whose sentence lengths vary too much for static graphs.
``state_dict`` names are unchanged.

``train.compile=auto`` (the default) compiles on CUDA for jobs of at least :data:`AUTO_COMPILE_MIN_STEPS`
steps, where the compilation (tens of seconds for bert-base, paid once per process and shape) is small
beside the training; shorter jobs, and every job off CUDA, run eager. ``true``/``false`` force it.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any

import torch

from cl_bench.models.encoder import SentenceEncoder

log = logging.getLogger(__name__)

#: ``train.compile``'s values, as run_specs.COMPILE_VALUES declares them (a copy, equal by test: the GPU benchmarks
#: import this module on an image without omegaconf, which run_specs imports)
COMPILE_SETTINGS = ("auto", "true", "false")
#: ``train.compile=auto`` compiles on CUDA from this many training steps on. Measured on one H200 (bert-base,
#: bf16, batch 64, length 32; docs/benchmarks.md): compiling the 4 buckets took 28 s and the compiled step saves
#: 16 ms (29.2 -> 13.2 ms), so compilation repays itself after about 1,750 steps
AUTO_COMPILE_MIN_STEPS = 2000
#: how many padded lengths a compiled run uses (each is one compiled graph)
BUCKET_COUNT = 4
#: the tensors of a prepared batch that padding to a bucket extends, and the value of their padding
#: (``input_ids`` takes the tokenizer's pad id); a batch with any other per-token tensor is left as it is
PADDED_KEYS = {"input_ids": None, "attention_mask": 0, "token_type_ids": 0, "special_tokens_mask": 1}


def compile_setting(value: Any) -> str:
    """``train.compile`` normalised: YAML booleans (``true``/``True``/bool) and ``auto``.

    Raises:
        ValueError: one line naming the key.
    """
    text = str(value).strip().lower()
    if text not in COMPILE_SETTINGS:
        raise ValueError(f"train.compile: must be one of {', '.join(COMPILE_SETTINGS)}, got '{value}'")
    return text


def compile_wanted(value: Any, device: torch.device, total_steps: int) -> bool:
    """Whether a run compiles: ``true``/``false`` as said; ``auto`` on CUDA for long enough jobs."""
    setting = compile_setting(value)
    if setting == "auto":
        return device.type == "cuda" and total_steps >= AUTO_COMPILE_MIN_STEPS
    return setting == "true"


def compile_mode(device: torch.device) -> str:
    """``reduce-overhead`` (CUDA graphs) on CUDA, inductor's default elsewhere."""
    return "reduce-overhead" if device.type == "cuda" else "default"


def length_buckets(max_length: int, count: int = BUCKET_COUNT, multiple: int = 8) -> list[int]:
    """``count`` padded lengths evenly up to ``max_length``, each a multiple of ``multiple`` (or ``max_length``).

    >>> length_buckets(32)
    [8, 16, 24, 32]
    >>> length_buckets(64)
    [16, 32, 48, 64]
    >>> length_buckets(20)
    [8, 16, 20]
    """
    if max_length <= 0:
        return []
    lengths = {min(max_length, multiple * math.ceil(max_length * i / count / multiple)) for i in range(1, count + 1)}
    return sorted(lengths)


def bucket_of(length: int, buckets: list[int]) -> int:
    """The smallest bucket holding ``length`` (``length`` itself beyond the largest)."""
    return next((bucket for bucket in buckets if bucket >= length), length)


def pad_features(features: dict[str, torch.Tensor], length: int, pad_token_id: int) -> dict[str, torch.Tensor]:
    """Token tensors ``(rows, L)`` right-padded to ``length`` (masked: attention 0); unchanged when they hold
    another per-token tensor than :data:`PADDED_KEYS` or are already that long."""
    if "input_ids" not in features or set(features) - set(PADDED_KEYS):
        return features
    current = features["input_ids"].shape[-1]
    if features["input_ids"].ndim != 2 or current >= length:
        return features
    padded = {}
    for key, tensor in features.items():
        value = pad_token_id if key == "input_ids" else PADDED_KEYS[key]
        padded[key] = torch.nn.functional.pad(tensor, (0, length - current), value=value)
    return padded


class PadToBucket:
    """A method's ``prepare`` followed by padding every token dict of the prepared batch to its length bucket.

    Runs in the DataLoader workers with the rest of ``prepare``. Args: the method's ``prepare``, the
    buckets (:func:`length_buckets`), the tokenizer's pad token id.
    """

    def __init__(self, prepare: Callable[[list[Any], random.Random], Any], buckets: list[int], pad_token_id: int) -> None:
        self.prepare, self.buckets, self.pad_token_id = prepare, buckets, pad_token_id

    def __call__(self, items: list[Any], rng: random.Random) -> Any:
        prepared = self.prepare(items, rng)
        if not is_dataclass(prepared):
            return prepared
        for field in fields(prepared):
            value = getattr(prepared, field.name)
            if isinstance(value, dict) and torch.is_tensor(value.get("input_ids")):
                length = bucket_of(value["input_ids"].shape[-1], self.buckets)
                setattr(prepared, field.name, pad_features(value, length, self.pad_token_id))
        return prepared


def compile_encoder(method: torch.nn.Module, mode: str = "default", backend: str = "inductor") -> int:
    """Compile the training forward pass of every sentence encoder of ``method`` (static shapes); their count.

    ``backend="aot_eager"`` traces forward and backward as inductor does without generating code (the tests'
    quick check of the wiring).
    """
    encoders = [module for module in method.modules() if isinstance(module, SentenceEncoder)]
    options = {"mode": mode} if backend == "inductor" else {}
    for encoder in encoders:
        # dynamic=False: one graph per bucketed shape, never a symbolic-shape graph (CUDA graphs need static shapes)
        encoder.compiled_backbone = torch.compile(encoder.backbone.forward, dynamic=False, backend=backend, **options)
    log.info("train.compile: %d encoder backbone(s) compiled (%s, mode %s)", len(encoders), backend,
             options.get("mode", "-"))
    return len(encoders)
