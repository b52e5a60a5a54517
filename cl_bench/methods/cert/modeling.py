"""CERT (Fang et al., 2020): MoCo-v2 contrastive training of a sentence encoder.

Each sentence is the query; an augmentation of it is the key (CERT: its back-translation through
:mod:`cl_bench.augment.back_translation`; any text augmentation, a cutoff or dropout also work). The
key goes through a *momentum* copy of the query encoder (He et al. 2019): the key encoder gets no
gradient and follows ``θ_k ← m·θ_k + (1−m)·θ_q`` after every optimizer step. Negatives are a FIFO
queue of the last K keys, so the number of negatives does not depend on the batch size; the batch's
keys are enqueued only after the loss was computed (they are never their own negatives).

Both encoders end in MoCo-v2's projection head (``mlp``: Linear(H,H)–ReLU–Linear(H,dim); else
Linear(H,dim)), used in training only: the evaluated and saved encoder is the query encoder.
The loss is ``loss=moco`` (:mod:`cl_bench.losses.moco`), its temperature ``loss.tau`` (CERT: 0.07).
The momentum copies and the queue are :class:`~cl_bench.methods.base.MomentumMethod`'s.

MoCHi (Kalantidis et al., NeurIPS 2020) is an option: with ``mochi_synthetic`` (s) and/or
``mochi_query_mixed`` (s′) above 0, each query also gets s negatives mixed from pairs of its
``mochi_hardest`` (N) hardest queued keys and s′ mixed from itself and one of them
(:func:`cl_bench.losses.mochi.mix_hard_negatives`), passed to the loss as ``extra_negatives``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

from cl_bench.losses.mochi import mix_hard_negatives
from cl_bench.losses.moco import queue_logits
from cl_bench.methods.base import MethodContext, MomentumMethod, Prepared, encode_views, text_views
from cl_bench.methods.cert.configuration import MOCHI_HARDEST, CERTSpec
from cl_bench.models.encoder import SentenceEncoder


@dataclass
class QueryKey(Prepared):
    """A prepared CERT batch: query and key texts as token ids, tokenized apart (each its own padding)."""

    query: dict[str, torch.Tensor]
    key: dict[str, torch.Tensor]


class ProjectionHead(nn.Module):
    """MoCo's output layer: Linear(H, dim), or with ``mlp`` MoCo-v2's Linear(H, H)–ReLU–Linear(H, dim)."""

    def __init__(self, hidden_size: int, dim: int, mlp: bool) -> None:
        super().__init__()
        fc = nn.Linear(hidden_size, dim)
        self.net = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(), fc) if mlp else fc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CERT(MomentumMethod):
    """MoCo with a momentum key encoder and a queue of negatives; the key is an augmented sentence.

    Keys: declared on its spec (:class:`cl_bench.methods.cert.configuration.CERTSpec`); its loss is ``loss=moco``
    (queue InfoNCE, ``loss.tau``).
    """

    def __init__(self, context: MethodContext, spec: CERTSpec) -> None:
        super().__init__(context, spec)
        self.mochi = spec.mochi_synthetic + spec.mochi_query_mixed > 0
        self.mochi_hardest = MOCHI_HARDEST if spec.mochi_hardest is None else spec.mochi_hardest  # null: the paper's N
        self.head = ProjectionHead(self.encoder.hidden_size, spec.projection_dim, spec.mlp)
        # The key encoder starts as an exact copy and is only ever moved by the momentum update.
        self.key_encoder: SentenceEncoder = self.momentum_copy(self.encoder)
        self.key_head = self.momentum_copy(self.head)
        self.init_queue(spec.queue_size, spec.projection_dim)

    # ----- views ------------------------------------------------------------------------------
    def make_views(self, sentences: list[str], rng: random.Random | None = None) -> tuple[list[str], list[str]]:
        """Query and key texts: the key is the text augmentation of the sentence (CERT: back-translation),
        drawn from ``rng`` (default the method's)."""
        return text_views(self.augmentation, sentences, rng or self.rng, augment_first=self.spec.augment_query)

    def prepare(self, items: list[str], rng: random.Random) -> QueryKey:
        """Query and key texts (the key's text augmentation: back-translation look-ups, EDA…) as token
        ids, in a DataLoader worker; the key encoder and the queue stay in the step."""
        query, key = self.make_views(items, rng)
        return QueryKey(self.encoder.tokenize(query), self.encoder.tokenize(key))

    def _embed(self, encoder: SentenceEncoder, features: dict[str, torch.Tensor], augment_embeddings: bool) -> torch.Tensor:
        """Encode prepared token ids; with an embedding-level augmentation (cutoff) and ``augment_embeddings``,
        every row's embedding-layer output is augmented (the augmentation package's hook)."""
        features = self.to_device(features)
        if augment_embeddings:
            return encode_views(encoder, self.augmentation, features, 0, self.rng)
        return encoder(features)

    # ----- training ---------------------------------------------------------------------------
    def training_step(self, batch: list[str] | QueryKey) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        queries = self.head(self._embed(self.encoder, views.query, self.spec.augment_query))
        with torch.no_grad():  # no gradient to keys
            keys = self.key_head(self._embed(self.key_encoder, views.key, True))
        # The queue is only written in on_after_step (after backward), so no copy is needed here.
        if self.mochi:  # MoCHi: synthetic hard negatives of each query (torch's seeded RNG)
            mixed = mix_hard_negatives(
                queries, self.queue, num_hardest=self.mochi_hardest, num_synthetic=self.spec.mochi_synthetic,
                num_query_mixed=self.spec.mochi_query_mixed,
            )
            loss = self.loss_fn(queries, keys, self.queue, extra_negatives=mixed)
        else:
            loss = self.loss_fn(queries, keys, self.queue)
        self.pending_keys = keys.detach()
        with torch.no_grad():  # MoCo's (K+1)-way accuracy: how often the positive key wins (τ-free)
            top1 = (queue_logits(queries, keys, self.queue, 1.0).argmax(dim=1) == 0).float().mean()
        return {"loss": loss, "moco_top1": top1}

    def eval_encoder(self) -> SentenceEncoder:
        """The query encoder, without the projection head (what CERT fine-tunes downstream)."""
        return self.encoder
