"""The augmentation interface shared by all methods.

A text-level augmentation rewrites sentences (EDA, crop, deletion, back-translation); an
embedding-level one edits token embeddings inside the encoder (token/feature/span cutoff).
Model-side dropout, SimCSE's own "augmentation", needs neither: it is :class:`Dropout`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch


class Augmentation:
    """Identity augmentation; subclasses override one of the two hooks.

    Attributes:
        name: option name in ``conf/augmentation/``.
        embedding_level: True when :meth:`augment_embeddings` does the work (the method must then
            run the encoder from ``inputs_embeds``).
    """

    name: str = "none"
    embedding_level: bool = False

    def setup(self, encoder: Any, model_name_or_path: str) -> None:
        """Called once by the training loop before training (e.g. to load an MLM head)."""

    def augment_text(self, sentences: Sequence[str], rng: random.Random) -> list[str]:
        """Return one augmented view of each sentence (default: unchanged)."""
        return list(sentences)

    def augment_embeddings(
        self,
        embeddings: torch.Tensor,
        attention_mask: torch.Tensor,
        special_tokens_mask: torch.Tensor,
        generator: torch.Generator,
    ) -> torch.Tensor:
        """Return augmented token embeddings (B, T, H) (default: unchanged)."""
        return embeddings


class Dropout(Augmentation):
    """SimCSE's default: no text change; the two views differ only by the encoder's dropout masks."""

    name = "dropout"
