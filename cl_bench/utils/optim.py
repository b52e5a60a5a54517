"""Optimisers shared by training and evaluation (BERT-flow's fit): AdamW without Adam's bias correction.

Hugging Face transformers' old ``AdamW(correct_bias=False)`` (removed from transformers since) is what
IS-BERT's and Sentence-BERT v0.2.0's ``SentenceTransformer.fit`` and DeCLUTR's AllenNLP configs trained
with, and BERT-flow's TensorFlow ``AdamWeightDecayOptimizer`` (bohanli/BERT-flow optimization_bert_flow.py)
is the same update. torch has no switch for it, hence :class:`AdamWNoBiasCorrection`. It lives outside
``cl_bench.train`` so that ``cl_bench.eval`` (which imports no training code) can fit a flow with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


def implementation(device: torch.device, autocast_dtype: torch.dtype | None = None) -> dict[str, bool]:
    """torch AdamW's implementation switch for parameters on ``device`` trained under ``autocast_dtype``.

    Fused on CUDA (one kernel for all tensors; it honours ``found_inf``, which cl_bench/train/step.py's sync-free
    guard sets) and on a CPU under a reduced-precision autocast (bf16: ``train.precision=bf16``, or ``auto`` when
    iterating): torch's CPU kernel (torch >= 2.4) reads and writes each parameter, gradient and moment once, where
    foreach makes a pass over memory per operation and allocates the denominators (MiniLM's 11.7M-parameter word
    embeddings: 47 MB a step); measured in docs/benchmarks.md (issue 50). Its fp32 arithmetic rounds differently
    from foreach's (one ulp, far below bf16's rounding), so an fp32 run on a CPU keeps foreach: those runs stay
    bit-for-bit what the exactness tests pin.
    """
    if device.type == "cuda" or (device.type == "cpu" and autocast_dtype in (torch.bfloat16, torch.float16)):
        return {"fused": True}
    return {"foreach": True}


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
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for param in params:
                state = self.state[param]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                state["step"] += 1
            grads = [p.grad for p in params]
            exp_avgs = [self.state[p]["exp_avg"] for p in params]
            exp_avg_sqs = [self.state[p]["exp_avg_sq"] for p in params]
            # torch's multi-tensor ops: a handful of kernel launches per group on a GPU, not a handful per
            # parameter (the same arithmetic, operation by operation, as the update rule above)
            torch._foreach_mul_(exp_avgs, beta1)
            torch._foreach_add_(exp_avgs, grads, alpha=1.0 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1.0 - beta2)
            denominators = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_add_(denominators, group["eps"])
            torch._foreach_addcdiv_(params, exp_avgs, denominators, value=-group["lr"])
            if group["weight_decay"] > 0:
                torch._foreach_add_(params, params, alpha=-group["lr"] * group["weight_decay"])
        return loss
