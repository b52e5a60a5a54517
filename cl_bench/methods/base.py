"""The method interface: how a batch becomes views, which encoders and heads exist, the loss, hooks.

A method is an ``nn.Module`` built by the training loop as::

    method = hydra.utils.instantiate(cfg.method, context=MethodContext(...))

Its YAML's keys (other than ``_target_``) are the constructor's own hyperparameters.
The loop then only calls :meth:`Method.read_corpus`, :meth:`Method.batches`,
:meth:`Method.training_step`, :meth:`Method.on_after_step` and :meth:`Method.eval_encoder`.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from cl_bench.data.text import read_sentences
from cl_bench.models.encoder import SentenceEncoder

LossFn = Callable[..., torch.Tensor]


@dataclass
class MethodContext:
    """Everything a method is built from besides its own hyperparameters.

    Attributes:
        encoder: the trained sentence encoder (backbone + pooler + optional MLP head).
        loss: the configured contrastive loss, a pure function ``loss(anchors, positives, ...)``.
        augmentation: the configured text/embedding augmentation (``cl_bench.augment``), or None.
        model_name_or_path: where the encoder came from (for methods that load extra heads).
        max_length: training truncation length.
        seed: the run seed (for method-side randomness such as sampling).
        data: the resolved ``data`` config node as a plain dict.
    """

    encoder: SentenceEncoder
    loss: LossFn
    augmentation: Any = None
    model_name_or_path: str = ""
    max_length: int = 32
    seed: int = 42
    data: dict[str, Any] = field(default_factory=dict)


class Method(nn.Module, abc.ABC):
    """Base class of all methods. Subclasses implement :meth:`training_step` at least."""

    #: the name used in ``conf/method/<name>.yaml`` and MLflow tags
    name: str = "base"
    #: config groups whose choice acts on this method's training: a group left out here is rejected
    #: when overridden and left out of the run's params and tags (``cl_bench.config.validate``)
    uses: frozenset[str] = frozenset({"loss", "augmentation", "pooler"})
    #: the loss calls this method makes (``cl_bench.losses.loss_kind``); other losses are rejected
    loss_kinds: tuple[str, ...] = ("pair",)
    #: inputs the method passes to its loss besides the views (``hard_negatives``, ``labels``): a loss
    #: hyperparameter that needs one of them (``loss_kind(needs=...)``) acts only when it is supplied
    supplies: frozenset[str] = frozenset()

    def __init__(self, context: MethodContext) -> None:
        super().__init__()
        self.encoder = context.encoder
        self.loss_fn = context.loss
        self.augmentation = context.augmentation
        self.context = context
        #: the method's python-side RNG (text augmentation, span sampling…); checkpoints save its
        #: state, so use it (or torch's global RNG) for every random choice to keep resumes exact.
        self.rng = random.Random(context.seed)

    # ----- data -------------------------------------------------------------------------------
    def read_corpus(self, path: str) -> Sequence[Any]:
        """Read the training file into items (default: one sentence per line)."""
        return read_sentences(path, limit=self.context.data.get("limit"))

    def batches(self, items: Sequence[Any], batch_size: int, generator: torch.Generator) -> Iterator[list[Any]]:
        """Yield one epoch of item batches (default: a seeded shuffle, last partial batch kept).

        Methods whose batches need structure (contiguous sentences, documents) override this.
        """
        order = torch.randperm(len(items), generator=generator).tolist()
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            if len(chunk) >= 2:  # in-batch negatives need two sentences
                yield [items[i] for i in chunk]

    def num_batches(self, num_items: int, batch_size: int) -> int:
        """Batches per epoch yielded by :meth:`batches` (for schedules and progress bars)."""
        full, rest = divmod(num_items, batch_size)
        return full + (1 if rest >= 2 else 0)

    # ----- training ---------------------------------------------------------------------------
    @abc.abstractmethod
    def training_step(self, batch: list[Any]) -> dict[str, torch.Tensor]:
        """Compute the loss of one batch; returns a dict with ``loss`` and any named terms."""

    def on_after_step(self) -> None:
        """Called after each optimizer step (momentum updates, queues)."""

    def eval_encoder(self) -> SentenceEncoder:
        """The encoder that evaluation scores and checkpoints save."""
        return self.encoder

    def tokenize(self, sentences: Sequence[str]) -> dict[str, torch.Tensor]:
        """Tokenize to the training length and move to the encoder's device."""
        device = self.encoder.device
        return {k: v.to(device) for k, v in self.encoder.tokenize(sentences).items()}
