"""QuickThoughts (Logeswaran & Lee, ICLR 2018): pick a sentence's neighbours among the batch.

Batches are contiguous runs of corpus sentences, so each sentence's context (the previous and
next ``context_size`` sentences) is in the batch. An input encoder f and a candidate encoder g
score every pair; the objective is the neighbour classifier ``loss=neighbour``
(:mod:`cl_bench.losses.neighbour`: ``f(s)ᵀg(c)`` by default, a softmax over the batch with the context
sentences as equally weighted targets, as in the official S2V code). With
``encoders: 1`` f and g share weights (SimCSE Table 2's one-encoder variant). The final
embedding is f(s) ⊕ g(s) (``embedding: concat``), or f or g alone.
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_bench.methods.base import Method, MethodContext, Tokenized
from cl_bench.methods.quickthoughts.configuration import QuickThoughtsSpec
from cl_bench.models.encoder import SentenceEncoder

log = logging.getLogger(__name__)

CONTEXT_ENCODER_DIR = "context_encoder"
#: corpora whose lines are shuffled sentences: adjacent lines are not neighbours there
_SHUFFLED_CORPORA = ("wiki1m", "wiki1m_head")


def neighbour_targets(batch_size: int, context_size: int, device: torch.device | None = None) -> torch.Tensor:
    """(B, B) target distribution: row i spreads mass 1 evenly over rows i±1..i±context_size in the batch
    (``method.context_size``, its rule declared on :class:`~cl_bench.methods.quickthoughts.configuration.QuickThoughtsSpec`).

    Sentences at the edge of the run have fewer neighbours (S2V's ``np.eye(k=offset)`` sum).
    """
    if batch_size < 2:
        raise ValueError(f"a contiguous batch needs >= 2 sentences, got {batch_size}")
    positions = torch.arange(batch_size, device=device)
    distance = (positions.unsqueeze(0) - positions.unsqueeze(1)).abs()
    marks = ((distance >= 1) & (distance <= context_size)).float()
    return marks / marks.sum(dim=1, keepdim=True)


class ConcatEncoder:
    """Evaluation view of QuickThoughts' f ⊕ g: embeds with both encoders and concatenates.

    Args:
        first: the input encoder f.
        second: the candidate encoder g.
    """

    def __init__(self, first: SentenceEncoder, second: SentenceEncoder) -> None:
        self.first = first
        self.second = second

    @property
    def hidden_size(self) -> int:
        """Width of the concatenated vector."""
        return self.first.hidden_size + self.second.hidden_size

    @property
    def device(self) -> torch.device:
        return self.first.device

    def encode(self, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
        """(N, H_f + H_g) float32: ``[f(s), g(s)]`` per sentence."""
        return np.concatenate(
            [self.first.encode(sentences, batch_size), self.second.encode(sentences, batch_size)], axis=1
        )

    def save(self, out_dir: str | Path, extra_meta: dict[str, Any] | None = None) -> None:
        """f in Hugging Face format at ``out_dir`` (what ``mode=eval`` loads), g under ``context_encoder/``.

        The meta file records that the evaluated embedding was the concatenation.
        """
        out_dir = Path(out_dir)
        meta = {**(extra_meta or {}), "embedding": "concat", "context_encoder": CONTEXT_ENCODER_DIR}
        self.first.save(out_dir, meta)
        self.second.save(out_dir / CONTEXT_ENCODER_DIR, {**(extra_meta or {}), "embedding": "g"})


class QuickThoughts(Method):
    """Neighbour classification over contiguous batches with encoders f (input) and g (candidates).

    Keys: declared on its spec (:class:`cl_bench.methods.quickthoughts.configuration.QuickThoughtsSpec`).
    """

    def __init__(self, context: MethodContext, spec: QuickThoughtsSpec) -> None:
        super().__init__(context, spec)
        # g starts as a copy of f (both from the same checkpoint); registered only when distinct.
        self.context_encoder: SentenceEncoder | None = copy.deepcopy(self.encoder) if spec.encoders == 2 else None

    @property
    def candidate_encoder(self) -> SentenceEncoder:
        """g: the context encoder, or f itself with ``encoders: 1``."""
        return self.context_encoder if self.context_encoder is not None else self.encoder

    # ----- data -------------------------------------------------------------------------------
    def read_corpus(self, path: str) -> Sequence[str]:
        """Sentences in corpus order (adjacent lines must be adjacent sentences)."""
        if self.context.data.get("name") in _SHUFFLED_CORPORA:
            log.warning(
                "quickthoughts: data=%s holds shuffled sentences, so adjacent lines are not neighbours; "
                "use data=enwiki_sentences", self.context.data.get("name"),
            )
        return super().read_corpus(path)

    def batches(self, items: Sequence[str], batch_size: int, generator: torch.Generator) -> Iterator[list[str]]:
        """Contiguous runs of ``batch_size`` sentences, the runs in a seeded random order.

        The last, shorter run is kept when it has at least two sentences (as the base class).
        """
        starts = list(range(0, len(items), batch_size))
        for index in torch.randperm(len(starts), generator=generator).tolist():
            run = list(items[starts[index] : starts[index] + batch_size])
            if len(run) >= 2:
                yield run

    # ----- training ---------------------------------------------------------------------------
    def prepare(self, items: list[str], rng: random.Random) -> Tokenized:
        """The contiguous run as token ids, in corpus order (in a DataLoader worker; :meth:`batches`,
        which picks the runs, is computed from the seed in every process)."""
        return Tokenized(self.encoder.tokenize(items))

    def training_step(self, batch: list[str] | Tokenized) -> dict[str, torch.Tensor]:
        features = self.to_device(self.prepared(batch).features)
        inputs = self.encoder(features)
        # One shared encoder: f(s) and g(s) are the same vectors (one forward pass).
        candidates = self.context_encoder(features) if self.context_encoder is not None else inputs
        size = len(inputs)
        targets = neighbour_targets(size, self.spec.context_size, inputs.device)
        loss = self.loss_fn(inputs, candidates, targets)
        with torch.no_grad():  # share of rows whose best candidate (by inner product) is a true neighbour
            scores = inputs.float() @ candidates.float().T
            best = scores.masked_fill(torch.eye(size, dtype=torch.bool, device=scores.device), float("-inf"))
            accuracy = (targets.gather(1, best.argmax(dim=1, keepdim=True)) > 0).float().mean()
        return {"loss": loss, "neighbour_accuracy": accuracy}

    def eval_encoder(self) -> SentenceEncoder | ConcatEncoder:
        """f ⊕ g, f or g, as ``embedding`` says."""
        if self.spec.embedding == "f":
            return self.encoder
        if self.spec.embedding == "g":
            return self.candidate_encoder
        return ConcatEncoder(self.encoder, self.candidate_encoder)
