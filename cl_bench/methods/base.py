"""The method interface: how a batch becomes views, which encoders and heads exist, the loss, hooks.

A method is an ``nn.Module`` built by the training loop from its config node and what it runs on::

    method = cl_bench.specs.build(OmegaConf.to_container(cfg.method, resolve=True), MethodContext(...))

which calls ``Method(context, spec)``: its YAML's keys (other than ``_target_`` and ``defaults``) are the fields of
its spec (:class:`cl_bench.specs.MethodSpec`), already checked; the method reads them as ``self.spec.<key>``.
The loop then only calls :meth:`Method.read_corpus`, :meth:`Method.batches`,
:meth:`Method.training_step`, :meth:`Method.on_after_step` and :meth:`Method.eval_encoder`.
"""

from __future__ import annotations

import abc
import copy
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cl_bench.augment.cutoff import encode_with_embedding_augmentation
from cl_bench.data.text import read_sentences
from cl_bench.models.encoder import SentenceEncoder
from cl_bench.specs import MethodSpec
from cl_bench.utils import distributed

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
    loss: LossFn | None
    augmentation: Any = None
    model_name_or_path: str = ""
    max_length: int = 32
    seed: int = 42
    data: dict[str, Any] = field(default_factory=dict)


class Prepared:
    """Base of a batch after :meth:`Method.prepare` (text views, token ids on the CPU).

    A subclass is a dataclass; its tensor and dict-of-tensor fields are pinned by the DataLoader on CUDA.
    """

    def pin_memory(self) -> Prepared:
        for name, value in vars(self).items():
            if torch.is_tensor(value):
                setattr(self, name, value.pin_memory())
            elif isinstance(value, dict) and all(torch.is_tensor(v) for v in value.values()):
                setattr(self, name, {k: v.pin_memory() for k, v in value.items()})
        return self


@dataclass
class Tokenized(Prepared):
    """A prepared batch that is one list of texts as token ids (CPU), in the order the method encodes them."""

    features: dict[str, torch.Tensor]


@dataclass
class TextViews(Prepared):
    """A prepared batch of groups of ``size`` texts each — two views of each sentence, or the columns of
    pairs/triples — tokenized together for one forward pass: group ``g`` is rows ``[g·size, (g+1)·size)``."""

    size: int
    features: dict[str, torch.Tensor]


def tokenize_groups(encoder: Any, groups: Sequence[Sequence[str]]) -> TextViews:
    """Equal-size groups of texts (views, columns) as one :class:`TextViews` (token ids on the CPU).

    Group ``g`` is wrapped in its view prompt (``model.view_prompts``; :meth:`SentenceEncoder.view_prompt`).
    """
    texts = [text for group in groups for text in group]
    view_prompt = getattr(encoder, "view_prompt", None)
    if view_prompt is None or not getattr(encoder, "view_prompts", None):
        return TextViews(len(groups[0]), encoder.tokenize(texts))
    prompts = [view_prompt(g) for g, group in enumerate(groups) for _ in group]
    return TextViews(len(groups[0]), encoder.tokenize(texts, prompts=prompts))


class Method(nn.Module, abc.ABC):
    """Base class of all methods. Subclasses implement :meth:`training_step` at least.

    Args:
        context: what the method runs on (encoder, loss, augmentation, ...).
        spec: its settings (``self.spec.<key>``): the defaults declared on it, as ``conf/method/<name>.yaml`` and
            the run change them, checked.
    """

    def __init__(self, context: MethodContext, spec: MethodSpec) -> None:
        super().__init__()
        self.spec = spec
        self.encoder = context.encoder
        self.loss_fn = context.loss
        self.augmentation = context.augmentation
        self.context = context
        #: the method's python-side RNG (text augmentation, span sampling…); checkpoints save its
        #: state, so use it (or torch's global RNG) for every random choice to keep resumes exact.
        self.rng = random.Random(context.seed)

    @property
    def name(self) -> str:
        """The name of ``conf/method/<name>.yaml`` (``method.name``), for messages and MLflow tags."""
        return self.spec.name

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

    def prepare(self, items: list[Any], rng: random.Random) -> Any:
        """The CPU-side work on one batch — text augmentation, tokenisation — run in a DataLoader worker
        (``train.num_workers``; :mod:`cl_bench.data.loader`). Every random choice must come from
        ``rng`` (seeded per batch). What needs the model (dropout, cutoff, MLM masking, frozen or
        momentum encoders) stays in :meth:`training_step`. Default: the items unchanged.
        """
        return items

    def prepared(self, batch: Any) -> Any:
        """``batch`` as :meth:`prepare` returns it: as given when the data loader prepared it, else
        prepared now with the method's own RNG (direct calls, GradCache's chunks)."""
        return batch if isinstance(batch, Prepared) else self.prepare(batch, self.rng)

    def to_device(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Prepared token tensors on the encoder's device (asynchronous from pinned memory)."""
        device = self.encoder.device
        return {k: v.to(device, non_blocking=True) for k, v in features.items()}

    # ----- training ---------------------------------------------------------------------------
    @abc.abstractmethod
    def training_step(self, batch: list[Any]) -> dict[str, torch.Tensor]:
        """Compute the loss of one batch; returns a dict with ``loss`` and any named terms."""

    def on_after_step(self) -> None:
        """Called after each optimizer step (momentum updates, queues)."""

    def eval_encoder(self) -> SentenceEncoder:
        """The encoder that evaluation scores and checkpoints save."""
        return self.encoder

    def selection_encoder(self) -> SentenceEncoder:
        """The encoder the dev evaluation that selects the checkpoint scores: :meth:`eval_encoder`, unless the
        official code selected on another embedding than it tested (MixCSE with its MLP; PromptBERT's trainer)."""
        return self.eval_encoder()

    def tokenize(self, sentences: Sequence[str]) -> dict[str, torch.Tensor]:
        """Tokenize to the training length and move to the encoder's device."""
        device = self.encoder.device
        return {k: v.to(device) for k, v in self.encoder.tokenize(sentences).items()}


class MomentumMethod(Method):
    """A method with momentum-updated copies of some of its modules and, optionally, a queue.

    MoCo-style methods (CERT; BYOL's target network; a queue for MoCHi) build their online
    modules, then call :meth:`momentum_copy` for each: the copy starts equal and only ever moves by
    θ_copy ← m·θ_copy + (1−m)·θ_online after each optimizer step. :meth:`init_queue` adds a FIFO
    queue of normalised keys that :meth:`on_after_step` fills with the keys a step left in
    :attr:`pending_keys` (after the update, so keys are never their own negatives).
    """

    def __init__(self, context: MethodContext, spec: MethodSpec) -> None:
        super().__init__(context, spec)
        self.momentum = float(spec.momentum)  # a momentum method's spec has the key m
        self._momentum_pairs: list[tuple[nn.Module, nn.Module]] = []
        self.pending_keys: torch.Tensor | None = None

    def momentum_copy(self, online: nn.Module) -> nn.Module:
        """A frozen copy of ``online`` that :meth:`momentum_update` moves towards it."""
        copy_ = copy.deepcopy(online)
        copy_.requires_grad_(False)
        self._momentum_pairs.append((copy_, online))
        return copy_

    @torch.no_grad()
    def momentum_update(self) -> None:
        """θ_copy ← m·θ_copy + (1−m)·θ_online for every momentum copy."""
        for copy_, online in self._momentum_pairs:
            for target, source in zip(copy_.parameters(), online.parameters(), strict=True):
                target.mul_(self.momentum).add_(source.detach(), alpha=1.0 - self.momentum)

    # ----- queue ------------------------------------------------------------------------------
    def init_queue(self, size: int, dim: int, start_empty: bool = False) -> None:
        """A queue of ``size`` keys of width ``dim``, random unit vectors at first (as MoCo); with
        ``start_empty`` it holds no key at first and grows to ``size`` (ESimCSE's official queue):
        :meth:`queued_keys` then returns only the keys enqueued so far."""
        start = torch.zeros(size, dim) if start_empty else F.normalize(torch.randn(size, dim), dim=1)
        self.register_buffer("queue", start)
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        if start_empty:  # only then: CERT's checkpoints keep their keys
            self.register_buffer("queue_filled", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Write normalised ``keys`` over the oldest queue entries (a ring buffer: FIFO, exactly K rows)."""
        keys = F.normalize(keys.detach().to(torch.promote_types(keys.dtype, self.queue.dtype)), dim=1)  # bf16 keys: fp32
        size = self.queue.shape[0]
        if keys.shape[0] > size:  # a batch larger than the queue: only its last K keys survive
            self.queue_ptr.add_(keys.shape[0] - size).remainder_(size)
            keys = keys[-size:]
        rows = (self.queue_ptr + torch.arange(keys.shape[0], device=self.queue.device)) % size
        self.queue[rows] = keys.to(self.queue.dtype)
        self.queue_ptr.add_(keys.shape[0]).remainder_(size)
        if hasattr(self, "queue_filled"):
            self.queue_filled.add_(keys.shape[0]).clamp_(max=size)

    def queue_in_order(self) -> torch.Tensor:
        """The queued keys from oldest to newest (K, dim)."""
        ptr = int(self.queue_ptr)
        return torch.cat([self.queue[ptr:], self.queue[:ptr]])

    def queued_keys(self) -> torch.Tensor:
        """The keys enqueued so far, oldest first: the whole queue, or fewer rows while a queue made with
        ``start_empty`` is filling up."""
        ordered = self.queue_in_order()
        filled = int(self.queue_filled) if hasattr(self, "queue_filled") else ordered.shape[0]
        return ordered[ordered.shape[0] - filled:]

    def on_after_step(self) -> None:
        """After the optimizer step: move the momentum copies, then enqueue this step's keys."""
        self.momentum_update()
        if self.pending_keys is not None and hasattr(self, "queue"):
            self.enqueue(distributed.gather_rows(self.pending_keys))  # under DDP: every rank's keys, in rank order
        self.pending_keys = None


# ----- helpers of the two-view methods (SimCSE, CERT, ESimCSE; with their own heads: Barlow Twins, BYOL, SwAV, memory bank) -----
def text_views(
    augmentation: Any, sentences: Sequence[str], rng: random.Random, augment_first: bool = True
) -> tuple[list[str], list[str]]:
    """Two text views of ``sentences``: each rewritten independently by a text augmentation (the first only
    with ``augment_first``, else the sentence itself), or the sentences themselves twice (dropout-only views,
    or an embedding-level augmentation applied later). The first view's draws come first from ``rng``."""
    if augmentation is None or augmentation.embedding_level:
        return list(sentences), list(sentences)
    first = augmentation.augment_text(sentences, rng) if augment_first else list(sentences)
    return first, augmentation.augment_text(sentences, rng)


def encode_views(
    encoder: Any, augmentation: Any, features: dict[str, torch.Tensor], num_first: int, rng: random.Random
) -> torch.Tensor:
    """Encode a batch of stacked views in one forward pass (independent dropout masks per row).

    With an embedding-level augmentation (cutoff) the rows from ``num_first`` on get it, as
    SimCSE applies it to the second view.
    """
    if augmentation is not None and augmentation.embedding_level:
        generator = torch.Generator(device="cpu").manual_seed(rng.getrandbits(63))
        return encode_with_embedding_augmentation(encoder, features, augmentation, num_first, generator)
    return encoder(features)


def mlp_head(in_dim: int, sizes: Sequence[int], *, last_bias: bool = True, hidden_bias: bool = True) -> nn.Sequential:
    """``Linear–BatchNorm–ReLU`` for every size but the last, then a ``Linear`` to the last size.

    The heads of Barlow Twins (``hidden_bias=False``, ``last_bias=False``), BYOL and SwAV; ``sizes`` is their spec's
    key (:data:`cl_bench.methods.specs.LayerSizes`, whose rule the spec's check runs).
    """
    layers: list[nn.Module] = []
    width = in_dim
    for size in sizes[:-1]:
        layers += [nn.Linear(width, int(size), bias=hidden_bias), nn.BatchNorm1d(int(size)), nn.ReLU()]
        width = int(size)
    layers.append(nn.Linear(width, int(sizes[-1]), bias=last_bias))
    return nn.Sequential(*layers)


def loss_keyword(loss_fn: Any, key: str, method: str) -> Any:
    """A hyperparameter of the configured loss (a ``functools.partial`` built by Hydra).

    Raises:
        ValueError: when the configured loss has no such keyword.
    """
    keywords = getattr(loss_fn, "keywords", {})
    if key not in keywords:
        raise ValueError(f"method={method} needs loss.{key} from its loss, but the configured loss has none")
    return keywords[key]


def apply_head(head: nn.Module, z: torch.Tensor, num_first: int, batch_norm: str) -> torch.Tensor:
    """Run a BatchNorm head on stacked views: each view on its own (``per_view``) or both stacked (``joint``).

    ``per_view`` is what SCD (scd/models.py l. 260-261), BSL (losses/BYOLoss.py l. 79-86) and both
    original papers do: batch statistics are taken over one view's batch. ``joint`` normalises the
    two views' rows together (equal for symmetric dropout views only in expectation).
    """
    if batch_norm == "joint":
        return head(z)
    return torch.cat([head(z[:num_first]), head(z[num_first:])])
