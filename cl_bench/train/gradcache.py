"""Gradient caching: contrastive batches larger than memory, with the exact big-batch gradient.

GradCache (Gao, Zhang, Han & Callan, 2021, "Scaling Deep Contrastive Learning Batch Size under
Memory Limited Setup") splits a step in three:

1. embed the batch chunk by chunk *without* a graph (only the embeddings stay in memory),
2. compute the loss of the whole batch on those embeddings (leaf tensors) and backpropagate it to
   them — this is the only place where the chunks meet, so in-batch negatives are untouched,
3. re-embed each chunk *with* a graph and backpropagate the cached embedding gradients into the
   encoder, one chunk at a time.

The second forward must see the same dropout masks as the first, so the RNG state (torch CPU and
CUDA, and the method's python RNG used by text augmentations) is recorded before each chunk in
pass 1 and replayed in pass 3 (the role of sentence-transformers' ``RandContext``). After the step
the RNGs are where pass 1 left them, as if each chunk had been encoded once.

Enable with ``train.gradcache_chunk=N`` (chunk size; 0 = off). A method supports it by providing

* ``cache_embed(items) -> tuple[Tensor, ...]``: embeddings of a chunk of the batch (rows of each
  tensor belong to the chunk), and
* ``cache_loss(embeddings) -> dict``: the loss terms (``loss`` first) of the whole batch from the
  concatenated embeddings;

and optionally ``gradcache_blocker() -> str | None`` naming a setting that rules it out.

Under DDP (``model``: the :func:`cl_bench.utils.distributed.data_parallel` wrapper) pass 3 runs every
chunk but the last inside ``no_sync``, so the gradients are all-reduced once per step, with the last
chunk's backward, as with one forward pass.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cl_bench.utils import distributed


@dataclass
class RandomState:
    """The RNG states a chunk's forward pass draws from."""

    cpu: torch.Tensor
    cuda: list[tuple[int, torch.Tensor]]
    python: Any
    method: Any

    @classmethod
    def capture(cls, method_rng: random.Random | None, cuda_devices: Sequence[int]) -> RandomState:
        """Record the current states."""
        return cls(
            cpu=torch.get_rng_state(),
            cuda=[(d, torch.cuda.get_rng_state(d)) for d in cuda_devices],
            python=random.getstate(),
            method=method_rng.getstate() if method_rng is not None else None,
        )

    def restore(self, method_rng: random.Random | None) -> None:
        """Put every RNG back to the recorded state."""
        torch.set_rng_state(self.cpu)
        for device, state in self.cuda:
            torch.cuda.set_rng_state(state, device)
        random.setstate(self.python)
        if method_rng is not None and self.method is not None:
            method_rng.setstate(self.method)


def check_supported(method: Any, chunk_size: int) -> None:
    """Raise a one-line error when ``method`` cannot train with ``train.gradcache_chunk``."""
    if chunk_size < 1:
        raise ValueError(f"train.gradcache_chunk: must be >= 1 to enable caching, got {chunk_size}")
    name = getattr(method, "name", type(method).__name__)
    if not (callable(getattr(method, "cache_embed", None)) and callable(getattr(method, "cache_loss", None))):
        raise ValueError(
            f"train.gradcache_chunk: method {name} has no cache_embed/cache_loss hooks; set train.gradcache_chunk=0"
        )
    blocker = getattr(method, "gradcache_blocker", None)
    reason = blocker() if callable(blocker) else None
    if reason:
        raise ValueError(f"train.gradcache_chunk: not with {reason} (or set train.gradcache_chunk=0)")


class GradCache:
    """Cached-gradient training steps for a method with ``cache_embed``/``cache_loss`` hooks.

    Usage (what the training loop does)::

        terms = cache.forward(batch)       # passes 1-2: embeddings and the loss, no encoder graph
        cache.backward(terms["loss"])      # pass 3: gradients reach the parameters chunk by chunk

    Args:
        method: the method (an ``nn.Module`` with the two hooks; its ``rng`` is replayed too).
        chunk_size: items encoded at once (the memory knob; the loss still sees the whole batch).
        autocast: factory of the autocast context used for both forward passes (they must match).
        model: the module pass 3 calls as ``model("cache_embed", chunk)`` (the DDP wrapper under
            torchrun); default: the method's own hook.
    """

    def __init__(
        self,
        method: Any,
        chunk_size: int,
        autocast: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
        model: torch.nn.Module | None = None,
    ) -> None:
        check_supported(method, chunk_size)
        self.method = method
        self.model = model
        self.chunk_size = int(chunk_size)
        self.autocast = autocast
        self._chunks: list[Sequence[Any]] = []
        self._states: list[RandomState] = []
        self._rows: list[list[int]] = []
        self._leaves: tuple[torch.Tensor, ...] = ()
        self._after_forward: RandomState | None = None

    def _cuda_devices(self) -> list[int]:
        devices = {p.device.index for p in self.method.parameters() if p.device.type == "cuda"}
        return sorted(d if d is not None else torch.cuda.current_device() for d in devices)

    def forward(self, batch: Sequence[Any]) -> dict[str, torch.Tensor]:
        """Embed ``batch`` in chunks without a graph; return the loss terms of the whole batch.

        The returned ``loss`` has a graph down to the cached embeddings only; call
        :meth:`backward` with it (or a scaled copy) to fill the parameters' gradients.
        """
        rng = getattr(self.method, "rng", None)
        devices = self._cuda_devices()
        self._chunks = [batch[i : i + self.chunk_size] for i in range(0, len(batch), self.chunk_size)]
        self._states, pieces = [], []
        with torch.no_grad(), self.autocast():
            for chunk in self._chunks:
                self._states.append(RandomState.capture(rng, devices))
                pieces.append(tuple(self.method.cache_embed(list(chunk))))
        self._after_forward = RandomState.capture(rng, devices)
        self._rows = [[piece[k].shape[0] for piece in pieces] for k in range(len(pieces[0]))]
        self._leaves = tuple(
            torch.cat([piece[k] for piece in pieces]).detach().requires_grad_(True) for k in range(len(pieces[0]))
        )
        with self.autocast():
            return self.method.cache_loss(self._leaves)

    def backward(self, loss: torch.Tensor) -> None:
        """Backpropagate ``loss`` (from :meth:`forward`, possibly scaled) into the parameters.

        Raises:
            RuntimeError: when called without a preceding :meth:`forward`.
        """
        if not self._leaves:
            raise RuntimeError("GradCache.backward called before forward")
        loss.backward()
        grads = [leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in self._leaves]
        rng = getattr(self.method, "rng", None)
        offsets = [0] * len(grads)
        try:
            last = len(self._chunks) - 1
            for index, (chunk, state) in enumerate(zip(self._chunks, self._states, strict=True)):
                state.restore(rng)  # the same dropout masks and augmentations as in pass 1
                # DDP all-reduces once, in the last chunk's backward
                last_chunk = self.model is None or index == last
                sync = contextlib.nullcontext() if last_chunk else distributed.no_sync(self.model)
                with sync:  # covers the chunk's forward and backward
                    with self.autocast():
                        outputs = tuple(
                            self.model("cache_embed", list(chunk)) if self.model is not None
                            else self.method.cache_embed(list(chunk))
                        )
                    tensors, chunk_grads = [], []
                    for k, output in enumerate(outputs):
                        rows = self._rows[k][index]
                        if output.requires_grad:  # an output of frozen modules only has nothing to push
                            tensors.append(output)
                            chunk_grads.append(grads[k][offsets[k] : offsets[k] + rows].to(output.dtype))
                        offsets[k] += rows
                    if tensors:
                        torch.autograd.backward(tensors, chunk_grads)
        finally:
            if self._after_forward is not None:
                self._after_forward.restore(rng)
            self._leaves, self._chunks, self._states = (), [], []
