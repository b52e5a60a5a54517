"""What a run's figures were measured with, written beside them (``results.json``'s ``provenance`` and MLflow
tags ``provenance.<field>``), so a table can say how each number came about.

Fields: ``aggregation`` (SentEval's aggregation of the STS12–16 headline figures), ``eval_pooler``,
``eval_mlp`` (``applied`` / ``dropped`` / ``none``) and ``mlp_dropped``, ``dev_selected_step`` and
``dev_metric`` (the checkpoint the figures come from), ``global_batch``, ``processes``,
``gathered_negatives``, ``train_precision`` (``train.precision`` resolved on the device),
``eval_precision``, ``torch``, ``transformers``, ``cuda`` and ``device_name``.
"""

from __future__ import annotations

import platform
from typing import Any

from omegaconf import DictConfig

#: the provenance fields, in the order tables show them
FIELDS = ("aggregation", "eval_pooler", "eval_mlp", "mlp_dropped", "dev_selected_step", "dev_metric", "global_batch",
          "processes", "gathered_negatives", "train_precision", "eval_precision", "torch", "transformers", "cuda",
          "device_name")
TAG_PREFIX = "provenance."


def eval_mlp(encoder: Any) -> str:
    """Whether the evaluated encoder's ``cls`` MLP head is applied at evaluation: ``applied``, ``dropped``
    (trained with it, ``mlp_only_train``: SimCSE's unsupervised setting) or ``none`` (no MLP)."""
    mlp = getattr(encoder, "mlp", None)
    if mlp is None or getattr(encoder, "pooler", "cls") != "cls":
        return "none"
    return "dropped" if getattr(encoder, "mlp_only_train", False) else "applied"


def device_name(device: str) -> str:
    """The GPU's name on CUDA, else the CPU's (``platform.processor()``, the machine type when empty)."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"cpu ({platform.processor() or platform.machine()})"


def _gathered(cfg: DictConfig, processes: int) -> str:
    if cfg.mode != "train":
        return "n/a (mode=eval)"
    if processes < 2:
        return "n/a (one process)"
    from cl_bench.config import loss_function, method_class
    from cl_bench.distributed import LOCAL_LOSS_KINDS

    if "loss" not in method_class(cfg).uses:
        return "no (the method has no loss group)"
    kind = getattr(loss_function(cfg), "loss_kind", None)
    return f"no ({kind} loss: exact on each process's rows)" if kind in LOCAL_LOSS_KINDS else "yes (all processes)"


def run_provenance(cfg: DictConfig, encoder: Any, device: str, best_step: int | None = None) -> dict[str, str]:
    """The provenance of a run's final figures (see the module docstring), all values text.

    Args:
        cfg: the run's composed config.
        encoder: the encoder the final evaluation scored.
        device: the device it ran on (``cuda``, ``cpu``...).
        best_step: the dev-selected step of a training run (None for ``mode=eval``).
    """
    import torch
    import transformers

    from cl_bench import distributed

    processes = distributed.world_size() if cfg.mode == "train" else 1
    mlp = eval_mlp(encoder)
    train_precision = "n/a (mode=eval)"
    if cfg.mode == "train":
        from cl_bench.train.precision import autocast_dtype

        dtype = autocast_dtype(str(cfg.train.precision), torch.device(device))
        train_precision = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    return {
        "aggregation": "all (STS12-16 sub-datasets pooled, SentEval; <task>_mean/_wmean also logged)",
        "eval_pooler": str(getattr(encoder, "pooler", cfg.pooler.name)),
        "eval_mlp": mlp,
        "mlp_dropped": str(mlp == "dropped").lower(),
        "dev_selected_step": str(best_step) if best_step is not None else "n/a (mode=eval)",
        "dev_metric": str(cfg.train.select_metric) if cfg.mode == "train" else "n/a (mode=eval)",
        "global_batch": str(cfg.train.batch_size) if cfg.mode == "train" else "n/a (mode=eval)",
        "processes": str(processes),
        "gathered_negatives": _gathered(cfg, processes),
        "train_precision": train_precision,
        "eval_precision": str(cfg.eval.precision),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": str(torch.version.cuda or "none"),
        "device_name": device_name(device),
    }
