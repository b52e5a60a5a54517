"""Sentence-BERT (Reimers & Gurevych, EMNLP 2019): a siamese encoder trained with supervised objectives.

The objective is the ``loss=`` option, and it decides what the training file holds:

* ``loss=sbert_softmax`` (classification, §3): NLI pairs with labels (SentEval's SNLI layout,
  ``s1/s2/labels.<split>``; ``method.nli_splits`` from the training file's directory); the
  classifier ``softmax(W_t [u; v; |u − v|])`` (3 classes) lives here and is dropped after training.
* ``loss=sbert_regression``: STS-B pairs (``sts-*.csv``) with their 0–5 gold score scaled to [0, 1];
  the cosine of ``u`` and ``v`` is regressed on it.
* ``loss=sbert_triplet``: (anchor, positive, negative) rows of a SimCSE-style NLI CSV
  (premise, entailment, contradiction); Euclidean triplet loss with margin 1.

Any loss of these kinds works the same way: ``cosent`` and ``angle`` are ``scored_pair`` losses (STS-B
pairs), ``angle_nli`` a ``triplet`` loss (NLI triples).

A ``scored_pair`` loss's pairs (``method.scored_pairs``): ``stsb`` reads an STS-B split, its 0–5 gold score
rescaled to [0, ``method.score_max``] (1, the default: score / 5, SBERT's regression target; 5: the raw score, as
AnglE's STS-B example feeds its labels); ``nli`` reads the NLI triples file as AnglE's format A, the premise paired
with its entailment (label 1) and with its contradiction (label 0) — AnglE's NLI data
(``SeanLee97/all_nli_angle_format_a``: entailment 1, contradiction 0, neutral skipped).

Sentences are encoded one by one through the configured pooler (SBERT: mean pooling); no
augmentation: the model's dropout is its only noise, as in SBERT.

``method.loss_block=B`` (``scored_pair`` and ``triplet`` losses) splits each batch into consecutive blocks of B rows
and averages the blocks' losses: the gradient of one step over G·B rows is then the mean of G per-block gradients,
which is what G GPUs × accumulation steps of B rows each give (AnglE's NLI command: 8 GPUs × 16 steps × 128 pairs).
With ``train.gradcache_chunk`` (GradCache hooks below) such a step fits in memory.

``method.train_classifier`` (classification objective only): ``true`` (default) trains the softmax
classifier with the encoder. ``false`` is sentence-transformers v0.2.0 (the release of the paper's
time): its ``fit`` built the optimiser over the model's own parameters only
(``SentenceTransformer.py``: ``param_optimizer = list(self.named_parameters())``), so the classifier of
``SoftmaxLoss`` kept its random initialisation, while its gradient still counted in the gradient
clipping (``clip_grad_norm_(loss_model.parameters(), 1)``). Fixed in 17a550d0 (v0.2.2, "SoftmaxLoss
classifier was not updated during training"); the same bug returned with v3.0's trainer (issue #2872),
fixed by #2881 (0a32ec84, in v3.1.0).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from cl_bench.data.nli import NLI_LABELS, read_nli_triples, read_snli_senteval_pairs
from cl_bench.data.senteval import read_stsb_split
from cl_bench.losses.sbert import pair_features
from cl_bench.methods.base import Method, MethodContext, TextViews, tokenize_groups
from cl_bench.methods.sbert.configuration import SBERTSpec
from cl_bench.specs import loss_spec_of

#: STS-B's gold scores run from 0 to 5; SBERT regresses the cosine on score / 5
STSB_MAX_SCORE = 5.0


@dataclass
class TargetedColumns(TextViews):
    """A prepared SBERT batch: the columns tokenized together, and the NLI labels or scaled STS-B
    scores (None for triplets)."""

    targets: torch.Tensor | None = None


class SBERT(Method):
    """Siamese fine-tuning with SBERT's classification, regression or triplet objective.

    Keys: declared on its spec (:class:`cl_bench.methods.sbert.configuration.SBERTSpec`; ``train_classifier``: see
    the module docstring); its loss is ``sbert_softmax``, ``sbert_regression`` or ``sbert_triplet`` (or another
    classifier, scored_pair or triplet loss).
    """

    def __init__(self, context: MethodContext, spec: SBERTSpec) -> None:
        super().__init__(context, spec)
        loss_spec = loss_spec_of(context.loss)  # the configured loss's kind, as its spec declares it
        self.kind = None if loss_spec is None else loss_spec.kind
        if self.kind not in SBERTSpec.loss_kinds:
            raise ValueError("loss: method=sbert needs a classifier, scored_pair or triplet loss (e.g. sbert_softmax, "
                             "sbert_regression, cosent, angle, sbert_triplet, angle_nli)")
        hidden = self.encoder.hidden_size
        # SBERT's classifier exists only for the classification objective
        self.classifier = nn.Linear(3 * hidden, len(NLI_LABELS)) if self.kind == "classifier" else None
        # train_classifier=false: the weights every step restores (taken at the first step, so that a
        # resumed run keeps the checkpoint's, which are the initial ones)
        self._fixed_classifier: list[torch.Tensor] | None = None

    def read_corpus(self, path: str) -> Sequence[tuple[Any, ...]]:
        """Labelled NLI pairs, scored STS-B pairs or NLI triples, as the loss needs."""
        limit = self.context.data.get("limit")
        if self.kind == "classifier":
            return read_snli_senteval_pairs(path, self.spec.nli_splits or None, limit)
        if self.kind == "scored_pair" and self.spec.scored_pairs == "nli":
            triples = read_nli_triples(path, limit=limit)
            if len(triples[0]) != 3:
                raise ValueError(f"data.train_file: {path} has no hard_neg column; method.scored_pairs=nli pairs the "
                                 "premise with its entailment (1) and its contradiction (0)")
            return [pair for premise, entailment, contradiction in triples
                    for pair in ((premise, entailment, 1.0), (premise, contradiction, 0.0))]
        if self.kind == "scored_pair":
            pairs = read_stsb_split(path)
            divisor = STSB_MAX_SCORE / self.spec.score_max  # 1.0 for score_max 5: the raw gold score, exactly
            rows = [(a, b, float(g) / divisor) for a, b, g in zip(pairs.sent1, pairs.sent2, pairs.gold, strict=True)]
            return rows[:limit] if limit is not None else rows
        rows = read_nli_triples(path, limit=limit)
        if len(rows[0]) != 3:
            raise ValueError(f"data.train_file: {path} has no hard_neg column; a triplet loss needs triples")
        return rows

    def prepare(self, items: list[tuple[Any, ...]], rng: random.Random) -> TargetedColumns:
        """The pair's two sentences (or the triplet's three) tokenized together, and the targets (in a worker)."""
        triplet = self.kind == "triplet"
        columns = tokenize_groups(self.encoder, [[row[c] for row in items] for c in range(3 if triplet else 2)])
        targets = None if triplet else torch.tensor([row[2] for row in items])  # int64 labels or float scores
        return TargetedColumns(columns.size, columns.features, targets)

    def training_step(self, batch: list[tuple[Any, ...]] | TargetedColumns) -> dict[str, torch.Tensor]:
        prepared = self.prepared(batch)
        # Encode every column of the batch in one forward pass; one (N, H) tensor per column.
        columns = self.encoder(self.to_device(prepared.features)).split(prepared.size)
        if self.kind == "triplet":
            return {"loss": self.blocked_loss(columns)}
        u, v = columns
        targets = prepared.targets.to(u.device, non_blocking=True)
        if self.kind == "classifier":
            if not self.spec.train_classifier and self._fixed_classifier is None:
                self._fixed_classifier = [p.detach().clone() for p in self.classifier.parameters()]
            logits = self.classifier(pair_features(u, v))
            loss = self.loss_fn(logits, targets)
            accuracy = (logits.argmax(1) == targets).float().mean().detach()
            return {"loss": loss, "nli_accuracy": accuracy}
        return {"loss": self.blocked_loss((u, v, targets))}

    def blocked_loss(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        """The configured loss of the batch's columns (and targets), or the mean of its blocks' losses
        (``method.loss_block``)."""
        rows = inputs[0].shape[0]
        if self.spec.loss_block <= 0 or self.spec.loss_block >= rows:
            return self.loss_fn(*inputs)
        blocks = [self.loss_fn(*(x[start : start + self.spec.loss_block] for x in inputs))
                  for start in range(0, rows, self.spec.loss_block)]
        return torch.stack(blocks).mean()

    # GradCache hooks (cl_bench/train/gradcache.py)
    def gradcache_blocker(self) -> str | None:
        """Why this configuration cannot train with gradient caching, or None when it can."""
        if self.kind == "classifier":
            return "loss=sbert_softmax (its classifier step keeps SBERT's own update rule); use a scored_pair or triplet loss"
        return None

    def cache_embed(self, batch: list[tuple[Any, ...]]) -> tuple[torch.Tensor, ...]:
        """GradCache hook: a chunk's column embeddings, and its targets (no gradient) for a scored_pair loss."""
        prepared = self.prepare(batch, self.rng)
        columns = tuple(self.encoder(self.to_device(prepared.features)).split(prepared.size))
        if prepared.targets is None:
            return columns
        return columns + (prepared.targets.to(columns[0].device),)

    def cache_loss(self, embeddings: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
        """GradCache hook: the (blocked) loss of the whole batch from its cached columns (and targets)."""
        if self.kind == "triplet":
            return {"loss": self.blocked_loss(embeddings[:3])}
        u, v, targets = embeddings
        return {"loss": self.blocked_loss((u, v, targets.detach()))}

    def on_after_step(self) -> None:
        """``train_classifier=false``: undo the optimiser's change to the classifier (v0.2.0's ``fit``).

        The classifier keeps its gradient, so that it counts in the gradient clipping as in v0.2.0
        (``clip_grad_norm_`` over the loss model's parameters); only its update is undone, weight decay
        included, so its weights stay exactly the initial ones.
        """
        if self._fixed_classifier is not None:
            with torch.no_grad():
                for param, fixed in zip(self.classifier.parameters(), self._fixed_classifier, strict=True):
                    param.copy_(fixed)
