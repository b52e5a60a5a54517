"""Instance discrimination with a memory bank (Wu, Xiong, Yu & Lin, CVPR 2018) on sentences.

Every training sentence is its own class. The encoder's sentence embedding goes through a linear
head to a ``feature_dim`` vector, L2-normalised (the paper's 128-d features); the bank holds one
such vector per sentence. The loss (``loss=memory_bank``) is NCE over each sentence's own bank
entry and ``num_noise`` entries drawn uniformly from the bank (paper: 4096), with Z estimated once
on the first batch (the official code's estimate) and the optional proximal term λ. After each
step the batch's entries move towards the new features: ``v ← normalise(m·v + (1 − m)·f)``
(official ``--nce-m 0.5``). The bank starts as random unit vectors. The views are the sentence
through dropout, after the configured text or cutoff augmentation if any.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cl_bench.losses.memory_bank import bank_logits, estimate_partition
from cl_bench.methods.base import (
    Method,
    MethodContext,
    Prepared,
    encode_views,
    loss_keyword,
)
from cl_bench.methods.memory_bank.configuration import MemoryBankSpec


@dataclass
class IndexedTexts(Prepared):
    """A prepared batch: the sentences' bank rows and their (augmented) texts as token ids."""

    index: torch.Tensor
    features: dict[str, torch.Tensor]


class MemoryBank(Method):
    """Non-parametric instance discrimination with a memory bank and NCE (its loss is ``memory_bank``).

    Keys: declared on its spec (:class:`cl_bench.methods.memory_bank.configuration.MemoryBankSpec`).
    """

    def __init__(self, context: MethodContext, spec: MemoryBankSpec) -> None:
        super().__init__(context, spec)
        self.tau = float(loss_keyword(context.loss, "tau", self.name))  # the loss's temperature, for Z's estimate
        self.head = nn.Linear(self.encoder.hidden_size, spec.feature_dim)
        self.register_buffer("bank", None)
        self.register_buffer("partition", torch.tensor(-1.0, dtype=torch.float64))  # < 0: not estimated yet
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None

    def read_corpus(self, path: str) -> Sequence[tuple[int, str]]:
        """The sentences, numbered; allocates one bank row per sentence."""
        sentences = super().read_corpus(path)
        generator = torch.Generator().manual_seed(self.context.seed)
        bank = F.normalize(torch.randn(len(sentences), self.spec.feature_dim, generator=generator), dim=1)
        self.bank = bank.to(self.encoder.device)
        return list(enumerate(sentences))

    def prepare(self, items: list[tuple[int, str]], rng: random.Random) -> IndexedTexts:
        """Bank rows and one view of each sentence (the text augmentation, if any), tokenized (in a worker)."""
        texts = [s for _, s in items]
        aug = self.augmentation
        if aug is not None and not aug.embedding_level:
            texts = aug.augment_text(texts, rng)
        return IndexedTexts(torch.tensor([i for i, _ in items]), self.encoder.tokenize(texts))

    def training_step(self, batch: list[tuple[int, str]] | IndexedTexts) -> dict[str, torch.Tensor]:
        if self.bank is None:
            raise RuntimeError("read_corpus must run before training (it allocates the bank)")
        prepared = self.prepared(batch)
        index = prepared.index.to(self.bank.device, non_blocking=True)
        z = encode_views(self.encoder, self.augmentation, self.to_device(prepared.features), 0, self.rng)
        features = F.normalize(self.head(z), dim=1)
        num_data = self.bank.shape[0]
        positives = self.bank[index]
        noise = self.bank[torch.randint(num_data, (len(index), self.spec.num_noise), device=self.bank.device)]
        if float(self.partition) < 0:
            self.partition.fill_(estimate_partition(bank_logits(features.detach(), positives, noise, self.tau), num_data))
        loss = self.loss_fn(features, positives, noise, num_data=num_data, partition=float(self.partition))
        self._pending = (index, features.detach())
        return {"loss": loss}

    @torch.no_grad()
    def on_after_step(self) -> None:
        """Move the batch's bank entries towards its features: ``v ← normalise(m·v + (1 − m)·f)``."""
        if self._pending is None:
            return
        index, features = self._pending
        m = self.spec.bank_momentum
        self.bank[index] = F.normalize(m * self.bank[index] + (1 - m) * features.to(self.bank.dtype), dim=1)
        self._pending = None
