"""Optimiser construction: AdamW with or without Adam's bias correction.

``train.adam_bias_correction=true`` (the default) is ``torch.optim.AdamW``, what the Hugging Face
Trainer behind SimCSE uses. ``false`` is Hugging Face transformers' old ``AdamW(correct_bias=False)``
(removed from transformers since), which IS-BERT's ``SentenceTransformer.fit`` (its default
``optimizer_params``) and DeCLUTR's AllenNLP configs (``huggingface_adamw``, ``correct_bias: false``)
trained with. torch has no switch for it, hence :class:`AdamWNoBiasCorrection`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from omegaconf import DictConfig


class AdamWNoBiasCorrection(torch.optim.Optimizer):
    """Adam with decoupled weight decay and no bias correction (transformers' ``AdamW(correct_bias=False)``).

    Per parameter, with gradient ``g`` and step ``t``::

        m <- beta1 * m + (1 - beta1) * g
        v <- beta2 * v + (1 - beta2) * g^2
        p <- p - lr * m / (sqrt(v) + eps)          # no 1/(1 - beta^t) factors
        p <- p - lr * weight_decay * p              # decoupled decay, after the update (as transformers)

    For a constant gradient the uncorrected step is ``lr * (1 - beta1^t) / sqrt(1 - beta2^t)`` instead of
    ``lr``: with betas (0.9, 0.999) about 3.2 lr at ``t = 1``, 6.5 lr at ``t = 10``, 1.3 lr at ``t = 1000``,
    so the early updates are larger than Adam's (a warm-up of the learning rate damps them).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ) -> None:
        if lr <= 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"invalid AdamWNoBiasCorrection settings: lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One update of every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                state["step"] += 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(param.grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(param.grad, param.grad, value=1.0 - beta2)
                param.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(group["eps"]), value=-group["lr"])
                if group["weight_decay"] > 0:
                    param.add_(param, alpha=-group["lr"] * group["weight_decay"])
        return loss


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
    named_parameters: Iterable[tuple[str, torch.nn.Parameter]], train_cfg: DictConfig
) -> torch.optim.Optimizer:
    """The optimiser ``train.*`` asks for: lr, betas, eps, weight decay and ``adam_bias_correction``."""
    groups = parameter_groups(named_parameters, train_cfg.weight_decay)
    betas = (train_cfg.adam_beta1, train_cfg.adam_beta2)
    if train_cfg.get("adam_bias_correction", True):  # partial configs (tests, callers) mean torch AdamW
        return torch.optim.AdamW(groups, lr=train_cfg.lr, betas=betas, eps=train_cfg.adam_eps)
    return AdamWNoBiasCorrection(groups, lr=train_cfg.lr, betas=betas, eps=train_cfg.adam_eps)
