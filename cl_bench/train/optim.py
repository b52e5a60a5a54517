"""Optimiser construction: AdamW with or without Adam's bias correction.

``train.adam_bias_correction=true`` (the default) is ``torch.optim.AdamW``, what the Hugging Face
Trainer behind SimCSE uses. ``false`` is Hugging Face transformers' old ``AdamW(correct_bias=False)``
(removed from transformers since), which IS-BERT's ``SentenceTransformer.fit`` (its default
``optimizer_params``) and DeCLUTR's AllenNLP configs (``huggingface_adamw``, ``correct_bias: false``)
trained with: :class:`cl_bench.utils.optim.AdamWNoBiasCorrection` (shared with BERT-flow's fit in ``cl_bench.eval``).

torch's AdamW runs its fused kernel on CUDA (one launch per group of tensors instead of a dozen per
parameter, and it honours the ``found_inf`` flag that the sync-free non-finite guard of
:mod:`cl_bench.train.step` sets) and on a CPU under bf16 autocast, and its ``foreach`` implementation for fp32
on a CPU (``implementation``: fused rounds fp32 differently by an ulp).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from cl_bench.run_specs import TrainConfig
from cl_bench.utils.optim import AdamWNoBiasCorrection, implementation

__all__ = ["AdamWNoBiasCorrection", "build_optimizer", "implementation", "parameter_groups"]


def parameter_groups(
    named_parameters: Iterable[tuple[str, torch.nn.Parameter]], weight_decay: float
) -> list[dict]:
    """Trainable parameters in two groups: decayed, and biases/LayerNorm weights undecayed (HF convention)."""
    decay, no_decay = [], []
    for name, param in named_parameters:
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def build_optimizer(
    named_parameters: Iterable[tuple[str, torch.nn.Parameter]], train: TrainConfig, fused: bool | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> torch.optim.Optimizer:
    """The optimiser the ``train`` spec asks for: lr, betas, eps, weight decay and ``adam_bias_correction``.

    ``fused`` None: :func:`implementation` of the parameters' device and the run's ``autocast_dtype`` (None: fp32);
    True/False force it (tests run the CUDA path's fused kernel on the CPU, where torch has one too).
    """
    groups = parameter_groups(named_parameters, train.weight_decay)
    betas = (train.adam_beta1, train.adam_beta2)
    if train.adam_bias_correction:
        params = [p for group in groups for p in group["params"]]
        kind = implementation(params[0].device if params else torch.device("cpu"), autocast_dtype)
        if fused is not None:
            kind = {"fused": True} if fused else {"foreach": True}
        return torch.optim.AdamW(groups, lr=train.lr, betas=betas, eps=train.adam_eps, **kind)
    return AdamWNoBiasCorrection(groups, lr=train.lr, betas=betas, eps=train.adam_eps)
