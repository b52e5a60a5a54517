"""The optimizer step of :class:`cl_bench.train.loop.Trainer`, torch only, without host synchronisation on CUDA.

A CUDA step that reads a value on the host (``loss.item()``, ``bool(torch.isfinite(loss))``) waits for the
GPU to finish everything queued before it, so the host cannot run ahead to launch the next step's kernels:
the chip idles for the Python time of every step. :class:`TrainStep` keeps the loss, the gradient norm and
the non-finite guard on the device and lets the caller read them at log steps only (:meth:`TrainStep.flush`):

* the guard is a device flag ``isfinite(loss) & isfinite(grad norm)``; a non-finite step is skipped by the
  fused AdamW kernel itself (its ``found_inf`` input, the mechanism torch's GradScaler uses: parameters,
  moments and the step count stay as they were), counted on the device, and its step number and loss terms
  kept there for the message;
* gradient clipping is torch's ``clip_grad_norm_``, whose foreach path scales by a clamped device tensor;
* the encoders pass their padding masks to the backbone in 4D (transformers' 2D mask builder asks the host
  whether anything is padded, in every forward pass).

On a CPU the step's large tensors (activations, the word embeddings' dense gradient: 47 MB for MiniLM) are
freshly allocated at every step, and glibc's malloc serves allocations above its mmap threshold (at most 32 MB)
with new pages that the kernel faults in and zeroes, then returns them at ``free``: 70-125 thousand page faults
per MiniLM step (batch 64, length 32) in docs/benchmarks.md. :func:`keep_freed_memory` makes the process keep
and reuse freed memory instead (the same arithmetic, bit for bit: only where the bytes live changes).

The deferred guard needs an optimizer that honours ``found_inf`` (torch's fused AdamW), one process (under
torchrun the ranks agree on each step with an all-reduce), no fp16 loss scaling (the GradScaler skips steps
itself), and a method whose :meth:`~cl_bench.methods.base.Method.on_after_step` does nothing (momentum
encoders, queues and banks must know whether the optimizer stepped). Otherwise the step reads the flag at
once, as before: one synchronisation per step. ``synchronous`` says which path a step takes.

This module imports neither Hydra nor OmegaConf, so ``benchmarks/bench_train_step.py`` times this exact step.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from cl_bench.methods.base import Method
from cl_bench.models.encoder import SentenceEncoder
from cl_bench.utils import distributed

log = logging.getLogger(__name__)

#: glibc ``mallopt`` parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_MAX
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
#: freed memory at the top of the heap kept for reuse up to this size (glibc's default trims above 128 KiB)
KEPT_FREE_BYTES = 1 << 30
_kept_freed_memory: bool | None = None  # None: not tried yet in this process


def keep_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory for reuse: no ``mmap`` per large allocation, no trimming below
    :data:`KEPT_FREE_BYTES`; once per process, True when it applies (a glibc process), False elsewhere.

    A CPU training step allocates the same large tensors at every step; with glibc's defaults each of them is a
    fresh mapping whose pages are faulted in and zeroed by the kernel (see the module docstring). Kept memory
    is reused instead; the process's resident size stays at its peak, which a training process reaches at its
    first step anyway.
    """
    global _kept_freed_memory
    if _kept_freed_memory is None:
        _kept_freed_memory = False
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name) if name else None
            mallopt = getattr(libc, "mallopt", None)
            gnu = getattr(libc, "gnu_get_libc_version", None)  # musl and other libcs: leave their allocator alone
        except OSError:
            mallopt = gnu = None
        if mallopt is not None and gnu is not None:
            _kept_freed_memory = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, KEPT_FREE_BYTES))
            log.debug("glibc malloc keeps freed memory for reuse (no mmap per allocation): %s", _kept_freed_memory)
    return _kept_freed_memory


@dataclass
class NonFiniteReport:
    """What :meth:`TrainStep.flush` read: how many steps were not finite since the last flush, and the first one.

    Attributes:
        count: non-finite steps since the last flush (0: all finite).
        first_step: the 1-based step number of the first of them (0 when ``count`` is 0).
        terms: the loss terms of that step, as Python floats (``loss=nan`` …).
    """

    count: int = 0
    first_step: int = 0
    terms: dict[str, float] = field(default_factory=dict)

    def values(self) -> str:
        """The terms as ``name=value`` for a message."""
        return ", ".join(f"{k}={v:.4g}" for k, v in self.terms.items())


def optimizer_honours_found_inf(optimizer: torch.optim.Optimizer) -> bool:
    """True for torch's fused Adam/AdamW, whose kernel skips the update where ``optimizer.found_inf`` is 1."""
    return isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW) and bool(optimizer.defaults.get("fused"))


def method_needs_step_outcome(method: torch.nn.Module) -> bool:
    """True when the method has its own ``on_after_step`` (momentum updates, queues, banks, step counters): it
    runs only after steps the optimizer took, so whether the step happened must be known on the host at once."""
    return getattr(type(method), "on_after_step", Method.on_after_step) is not Method.on_after_step


def _host_free_masks(method: torch.nn.Module) -> None:
    """Every sentence encoder of the method passes its padding mask in 4D: transformers' 2D mask builder reads
    ``mask.all()`` on the host in every forward pass (:func:`cl_bench.models.encoder.attention_bias`)."""
    for module in method.modules():
        if isinstance(module, SentenceEncoder):
            module.host_free_mask = True


class TrainStep:
    """Forward, backward, clipping, the non-finite guard and the optimizer step of one batch.

    Args:
        method: the method (its ``on_after_step`` runs after steps the optimizer took).
        forward: ``batch -> terms`` (``terms["loss"]`` the loss to minimise), inside ``autocast``.
        backward: ``loss -> None`` (default ``loss.backward()``; GradCache passes its own).
        optimizer: the optimizer over ``params``.
        params: the trained parameters (clipping and the gradient norm).
        max_grad_norm: clip the gradients' global L2 norm to this (``<= 0``: measure without clipping).
        autocast: the autocast context of the forward pass.
        scaler: the fp16 GradScaler, or None.
        defer_guard: None chooses: deferred on CUDA where possible (see the module docstring); True asks for it
            wherever possible (the CPU tests of the CUDA path), False never defers.
    """

    def __init__(
        self,
        method: torch.nn.Module,
        forward: Callable[[Any], dict[str, torch.Tensor]],
        optimizer: torch.optim.Optimizer,
        params: list[torch.nn.Parameter],
        max_grad_norm: float,
        autocast: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
        backward: Callable[[torch.Tensor], None] | None = None,
        scaler: Any = None,
        defer_guard: bool | None = None,
    ) -> None:
        self.method, self.forward, self.optimizer, self.params = method, forward, optimizer, params
        self.max_grad_norm = max_grad_norm if max_grad_norm > 0 else math.inf
        self.autocast, self.scaler = autocast, scaler
        self.backward = backward or (lambda loss: loss.backward())
        device = params[0].device if params else torch.device("cpu")
        if device.type == "cpu":
            keep_freed_memory()  # the step's large tensors reuse memory instead of faulting in new pages
        possible = (
            scaler is None
            and not distributed.is_distributed()
            and optimizer_honours_found_inf(optimizer)
            and not method_needs_step_outcome(method)
        )
        #: True: the guard is read at once every step (one host synchronisation); False: only at :meth:`flush`
        self.synchronous = not (possible and (defer_guard if defer_guard is not None else device.type == "cuda"))
        if not self.synchronous:
            _host_free_masks(method)
        self.device = device
        self.steps_taken = 0  # steps run by this object (numbering of the non-finite report)
        self._bad_count = torch.zeros((), dtype=torch.int64, device=device)
        self._first_bad = torch.zeros((), dtype=torch.int64, device=device)
        self._bad_terms: dict[str, torch.Tensor] = {}
        self.last_grad_norm: torch.Tensor | None = None

    def __call__(self, batch: Any) -> tuple[dict[str, torch.Tensor], bool | None]:
        """One step on ``batch``: the loss terms (device tensors) and whether the optimizer stepped — a bool
        on the synchronous path, None on the deferred one (the outcome is read by :meth:`flush`).

        The backward pass always runs (under torchrun every rank takes part in the gradient all-reduce); a
        non-finite step then discards the gradients on all ranks alike.
        """
        self.steps_taken += 1
        if self.device.type == "cuda":
            # a new iteration for the CUDA graphs of a compiled backbone (train.compile): the previous step's
            # graph outputs may be overwritten from here on (nothing of them is kept but device-side copies)
            torch.compiler.cudagraph_mark_step_begin()
        with self.autocast():
            terms = self.forward(batch)
        loss = terms["loss"]
        self.backward(self.scaler.scale(loss) if self.scaler is not None else loss)
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)  # foreach where torch has it
        self.last_grad_norm = grad_norm.detach()
        if self.synchronous or self.scaler is not None:
            stepped = self._step_synchronous(loss, grad_norm, terms)
            self.optimizer.zero_grad(set_to_none=True)
            return terms, stepped
        finite = torch.isfinite(loss.detach()) & torch.isfinite(grad_norm)
        self.optimizer.found_inf = (~finite).to(torch.float32)  # type: ignore[attr-defined]  # the fused kernel skips
        try:
            self.optimizer.step()
        finally:
            del self.optimizer.found_inf  # type: ignore[attr-defined]  # a later GradScaler sets its own
        self.optimizer.zero_grad(set_to_none=True)
        self._record(finite, terms)
        return terms, None

    def _step_synchronous(self, loss: torch.Tensor, grad_norm: torch.Tensor, terms: dict[str, torch.Tensor]) -> bool:
        """The guard read on the host: skip (and record) a non-finite step; whether the optimizer stepped."""
        # with fp16 the scaler handles overflowing gradients itself (skips the step)
        finite = distributed.all_true(
            bool(torch.isfinite(loss)) and (self.scaler is not None or bool(torch.isfinite(grad_norm)))
        )
        if not finite:
            self._record(torch.zeros((), dtype=torch.bool, device=self.device), terms)
            if self.scaler is not None:
                self.scaler.update()
            return False
        if self.scaler is not None:
            return scaler_step(self.scaler, self.optimizer)
        self.optimizer.step()
        return True

    def _record(self, finite: torch.Tensor, terms: dict[str, torch.Tensor]) -> None:
        """Count a non-finite step on the device; keep the number and terms of the first since the last flush."""
        bad = ~finite
        first = bad & (self._bad_count == 0)
        self._bad_count += bad.to(torch.int64)
        self._first_bad = torch.where(first, self.steps_taken, self._first_bad)
        for name, value in terms.items():
            value = value.detach().float().reshape(())
            kept = self._bad_terms.get(name)
            self._bad_terms[name] = value if kept is None else torch.where(first, value, kept)

    def flush(self) -> NonFiniteReport:
        """Read the guard on the host (one synchronisation): the non-finite steps since the last flush."""
        count = int(self._bad_count)
        if count == 0:
            return NonFiniteReport()
        report = NonFiniteReport(count, int(self._first_bad), {k: float(v) for k, v in self._bad_terms.items()})
        self._bad_count.zero_()
        self._first_bad.zero_()
        return report


def scaler_step(scaler: Any, optimizer: torch.optim.Optimizer) -> bool:
    """``scaler.step(optimizer)`` then ``scaler.update()``; whether the optimizer actually stepped.

    Under fp16 the GradScaler skips a step whose gradients overflowed and lowers its scale in
    ``update`` exactly then (the check the Hugging Face Trainer makes before its scheduler step), so
    a scale below the one before means the step did not happen.
    """
    before = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale() >= before
