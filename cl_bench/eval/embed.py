"""Encode every distinct sentence of an evaluation once, then look embeddings up by text."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)


class NonFiniteEmbeddingError(ValueError):
    """The encoder gave NaN or Inf embeddings (diverged weights): no figure computed from them would mean anything,
    and some computations on them fail (an SVD that does not converge)."""


class Encoder(Protocol):
    """Anything that embeds sentences: ``encode(sentences, batch_size) -> (N, H) float32``."""

    def encode(self, sentences: Sequence[str], batch_size: int) -> np.ndarray: ...


class EmbeddingTable:
    """The embeddings of a set of sentences, computed with a single ``encoder.encode`` call.

    Args:
        encoder: the model to score.
        sentences: every sentence the evaluation will look up (duplicates allowed).
        batch_size: passed to ``encoder.encode``.
    """

    def __init__(self, encoder: Encoder, sentences: Iterable[str], batch_size: int) -> None:
        unique = list(dict.fromkeys(sentences))
        self.index = {text: row for row, text in enumerate(unique)}
        start = time.perf_counter()
        vectors = np.asarray(encoder.encode(unique, batch_size=batch_size))
        self.seconds = time.perf_counter() - start
        if vectors.ndim != 2 or vectors.shape[0] != len(unique):
            raise ValueError(
                f"encoder.encode returned shape {vectors.shape} for {len(unique)} sentences; expected (N, H)"
            )
        self.vectors = vectors.astype(np.float32, copy=False)
        finite = np.isfinite(self.vectors).all(axis=1)
        if not finite.all():  # before any figure: a NaN row turns every score into NaN or an error
            raise NonFiniteEmbeddingError(f"{int((~finite).sum())} of {len(unique)} sentence embeddings are "
                                          "NaN/Inf")
        log.info("encoded %d distinct sentences in %.1f s", len(unique), self.seconds)

    def __len__(self) -> int:
        return len(self.index)

    def truncate(self, dim: int | None) -> None:
        """Keep the first ``dim`` coordinates of every embedding (``eval.truncate_dim``; None keeps all).

        Raises:
            ValueError: ``dim`` exceeds the embedding width.
        """
        if dim is None:
            return
        if dim > self.width:
            raise ValueError(f"eval.truncate_dim: {dim} exceeds the embedding width {self.width}")
        self.vectors = np.ascontiguousarray(self.vectors[:, :dim])

    @property
    def width(self) -> int:
        """Embedding width H."""
        return int(self.vectors.shape[1])

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        """(len(sentences), H) float32 embeddings, in the order given."""
        return self.vectors[[self.index[text] for text in sentences]]
