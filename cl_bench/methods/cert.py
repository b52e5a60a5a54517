"""CERT (Fang et al., 2020): MoCo-v2 contrastive training of a sentence encoder.

Each sentence is the query; an augmentation of it is the key (CERT: its back-translation through
:mod:`cl_bench.augment.back_translation`; any text augmentation, a cutoff or dropout also work). The
key goes through a *momentum* copy of the query encoder (He et al. 2019): the key encoder gets no
gradient and follows ``θ_k ← m·θ_k + (1−m)·θ_q`` after every optimizer step. Negatives are a FIFO
queue of the last K keys, so the number of negatives does not depend on the batch size; the batch's
keys are enqueued only after the loss was computed (they are never their own negatives).

Both encoders end in MoCo-v2's projection head (``mlp``: Linear(H,H)–ReLU–Linear(H,dim); else
Linear(H,dim)), used in training only: the evaluated and saved encoder is the query encoder.
The temperature is ``loss.tau`` (CERT: 0.07; see ``experiment=cert_bert``).

MoCHi (Kalantidis et al., NeurIPS 2020) is an option: with ``mochi_synthetic`` (s) and/or
``mochi_query_mixed`` (s′) above 0, each query also gets s negatives mixed from pairs of its
``mochi_hardest`` (N) hardest queued keys and s′ mixed from itself and one of them
(:func:`cl_bench.losses.mochi.mix_hard_negatives`).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cl_bench.augment.cutoff import encode_with_embedding_augmentation
from cl_bench.losses.mochi import mix_hard_negatives
from cl_bench.losses.moco import queue_info_nce, queue_logits
from cl_bench.methods.base import Method, MethodContext
from cl_bench.models.encoder import SentenceEncoder

#: MoCHi's N in the paper's main runs (Kalantidis et al. 2020)
MOCHI_HARDEST = 1024


def loss_temperature(loss_fn: Any, method: str) -> float:
    """The ``tau`` keyword of the configured loss (a ``functools.partial`` built by Hydra).

    Raises:
        ValueError: when the configured loss has no ``tau`` (the method has no other temperature).
    """
    tau = getattr(loss_fn, "keywords", {}).get("tau")
    if tau is None:
        raise ValueError(f"method={method} takes its temperature from loss.tau, but the configured loss has none")
    return float(tau)


class ProjectionHead(nn.Module):
    """MoCo's output layer: Linear(H, dim), or with ``mlp`` MoCo-v2's Linear(H, H)–ReLU–Linear(H, dim)."""

    def __init__(self, hidden_size: int, dim: int, mlp: bool) -> None:
        super().__init__()
        fc = nn.Linear(hidden_size, dim)
        self.net = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(), fc) if mlp else fc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CERT(Method):
    """MoCo with a momentum key encoder and a queue of negatives; the key is an augmented sentence.

    Args:
        context: shared build context.
        queue_size: K, the number of queued negative keys (CERT: 6720).
        momentum: m of the key-encoder update (CERT/MoCo: 0.999).
        projection_dim: output width of the projection head (CERT/MoCo: 128).
        mlp: MoCo-v2 MLP head (True, CERT) or a single linear layer (MoCo v1).
        augment_query: also augment the query sentence (MoCo augments both views; CERT only the key).
        mochi_hardest: MoCHi's N, the hardest queued keys that are mixed (None: the paper's 1024).
        mochi_synthetic: MoCHi's s, negatives mixed from two hard keys (0 with s′ = 0: MoCHi off).
        mochi_query_mixed: MoCHi's s′, negatives mixed from the query and one hard key.
    """

    name = "cert"

    def __init__(
        self,
        context: MethodContext,
        queue_size: int = 6720,
        momentum: float = 0.999,
        projection_dim: int = 128,
        mlp: bool = True,
        augment_query: bool = False,
        mochi_hardest: int | None = None,
        mochi_synthetic: int = 0,
        mochi_query_mixed: int = 0,
    ) -> None:
        super().__init__(context)
        if queue_size < 1:
            raise ValueError(f"method.queue_size: must be >= 1, got {queue_size}")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"method.momentum: must be in [0, 1], got {momentum}")
        if projection_dim < 1:
            raise ValueError(f"method.projection_dim: must be >= 1, got {projection_dim}")
        if mochi_synthetic < 0 or mochi_query_mixed < 0:
            raise ValueError("method.mochi_synthetic, method.mochi_query_mixed: must be >= 0")
        self.mochi = mochi_synthetic + mochi_query_mixed > 0
        if mochi_hardest is not None and not self.mochi:
            raise ValueError("method.mochi_hardest: acts only with method.mochi_synthetic or method.mochi_query_mixed > 0")
        mochi_hardest = MOCHI_HARDEST if mochi_hardest is None else mochi_hardest
        if self.mochi and not 1 <= mochi_hardest <= queue_size:
            raise ValueError(f"method.mochi_hardest: must be between 1 and method.queue_size ({queue_size}), got {mochi_hardest}")
        self.mochi_hardest, self.mochi_synthetic, self.mochi_query_mixed = mochi_hardest, mochi_synthetic, mochi_query_mixed
        self.tau = loss_temperature(context.loss, self.name)
        self.momentum = float(momentum)
        self.augment_query = augment_query
        self.head = ProjectionHead(self.encoder.hidden_size, projection_dim, mlp)
        # The key encoder starts as an exact copy and is only ever moved by the momentum update.
        self.key_encoder: SentenceEncoder = copy.deepcopy(self.encoder)
        self.key_head = copy.deepcopy(self.head)
        for param in self._key_parameters():
            param.requires_grad_(False)
        # MoCo initialises the queue with random unit vectors; they are flushed after K keys.
        self.register_buffer("queue", F.normalize(torch.randn(queue_size, projection_dim), dim=1))
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self._pending_keys: torch.Tensor | None = None

    # ----- MoCo mechanics ---------------------------------------------------------------------
    def _query_parameters(self) -> list[nn.Parameter]:
        return [*self.encoder.parameters(), *self.head.parameters()]

    def _key_parameters(self) -> list[nn.Parameter]:
        return [*self.key_encoder.parameters(), *self.key_head.parameters()]

    @torch.no_grad()
    def momentum_update(self) -> None:
        """θ_k ← m·θ_k + (1−m)·θ_q for every key-encoder/key-head parameter."""
        for key_param, query_param in zip(self._key_parameters(), self._query_parameters(), strict=True):
            key_param.mul_(self.momentum).add_(query_param.detach(), alpha=1.0 - self.momentum)

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Write normalised ``keys`` over the oldest queue entries (a ring buffer: FIFO, exactly K rows)."""
        keys = F.normalize(keys.detach().float(), dim=1)
        size = self.queue.shape[0]
        if keys.shape[0] > size:  # a batch larger than the queue: only its last K keys survive
            self.queue_ptr.add_(keys.shape[0] - size).remainder_(size)
            keys = keys[-size:]
        rows = (self.queue_ptr + torch.arange(keys.shape[0], device=self.queue.device)) % size
        self.queue[rows] = keys.to(self.queue.dtype)
        self.queue_ptr.add_(keys.shape[0]).remainder_(size)

    def queue_in_order(self) -> torch.Tensor:
        """The queued keys from oldest to newest (K, dim)."""
        ptr = int(self.queue_ptr)
        return torch.cat([self.queue[ptr:], self.queue[:ptr]])

    # ----- views ------------------------------------------------------------------------------
    def make_views(self, sentences: list[str]) -> tuple[list[str], list[str]]:
        """Query and key texts: the key is the text augmentation of the sentence (CERT: back-translation)."""
        aug = self.augmentation
        if aug is None or aug.embedding_level:
            return list(sentences), list(sentences)
        query = aug.augment_text(sentences, self.rng) if self.augment_query else list(sentences)
        return query, aug.augment_text(sentences, self.rng)

    def _embed(self, encoder: SentenceEncoder, texts: list[str], augment_embeddings: bool) -> torch.Tensor:
        """Encode ``texts``; with an embedding-level augmentation (cutoff) and ``augment_embeddings``,
        every row's embedding-layer output is augmented (the augmentation package's hook)."""
        features = self.tokenize(texts)
        aug = self.augmentation
        if augment_embeddings and aug is not None and aug.embedding_level:
            generator = torch.Generator(device="cpu").manual_seed(self.rng.getrandbits(63))
            return encode_with_embedding_augmentation(encoder, features, aug, 0, generator)
        return encoder(features)

    # ----- training ---------------------------------------------------------------------------
    def training_step(self, batch: list[str]) -> dict[str, torch.Tensor]:
        query_text, key_text = self.make_views(batch)
        queries = self.head(self._embed(self.encoder, query_text, self.augment_query))
        with torch.no_grad():  # no gradient to keys
            keys = self.key_head(self._embed(self.key_encoder, key_text, True))
        # The queue is only written in on_after_step (after backward), so no copy is needed here.
        mixed = None
        if self.mochi:  # MoCHi: synthetic hard negatives of each query (torch's seeded RNG)
            mixed = mix_hard_negatives(
                queries, self.queue, num_hardest=self.mochi_hardest, num_synthetic=self.mochi_synthetic,
                num_query_mixed=self.mochi_query_mixed,
            )
        loss = queue_info_nce(queries, keys, self.queue, tau=self.tau, extra_negatives=mixed)
        self._pending_keys = keys.detach()
        with torch.no_grad():  # MoCo's (K+1)-way accuracy: how often the positive key wins
            top1 = (queue_logits(queries, keys, self.queue, self.tau).argmax(dim=1) == 0).float().mean()
        return {"loss": loss, "moco_top1": top1}

    def on_after_step(self) -> None:
        """After the optimizer step: move the key encoder, then enqueue this step's keys."""
        self.momentum_update()
        if self._pending_keys is not None:
            self.enqueue(self._pending_keys)
            self._pending_keys = None

    def eval_encoder(self) -> SentenceEncoder:
        """The query encoder, without the projection head (what CERT fine-tunes downstream)."""
        return self.encoder
