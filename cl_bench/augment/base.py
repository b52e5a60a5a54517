"""The augmentation interface shared by all methods.

A text-level augmentation rewrites sentences (EDA, crop, deletion, MLM replacement,
back-translation); an embedding-level one edits token embeddings inside the encoder
(token/feature/span cutoff). Model-side dropout, SimCSE's own "augmentation", needs neither:
it is :class:`Dropout`. Every random choice comes from the ``random.Random`` or
``torch.Generator`` passed in, so a seeded run is reproducible.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any

import torch

log = logging.getLogger(__name__)


class Augmentation:
    """Identity augmentation (option ``none``); subclasses override one of the two hooks.

    Attributes:
        name: option name in ``conf/augmentation/``.
        embedding_level: True when :meth:`augment_embeddings` does the work (the method must then
            run the encoder from ``inputs_embeds``, or through
            :func:`cl_bench.augment.cutoff.encode_with_embedding_augmentation`).
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

    def augment_inputs(
        self,
        embeddings: torch.Tensor,
        attention_mask: torch.Tensor,
        special_tokens_mask: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Augmented token embeddings (B, T, H) and the attention mask (B, T) to use with them.

        Erasing a token (token/span cutoff) also removes it from the attention mask, as Shen et
        al. (2020) do; the default applies :meth:`augment_embeddings` and keeps the mask.
        """
        return self.augment_embeddings(
            embeddings, attention_mask, special_tokens_mask, generator
        ), attention_mask


def rewrites_text(augmentation: type[Augmentation]) -> bool:
    """True when an augmentation class changes sentences (overrides :meth:`Augmentation.augment_text`).

    Dropout and the embedding-level cutoffs leave the text as it is.
    """
    return getattr(augmentation, "augment_text", None) is not Augmentation.augment_text


class Dropout(Augmentation):
    """SimCSE's default: no text change; the two views differ only by the encoder's dropout masks."""

    name = "dropout"

    def setup(self, encoder: Any, model_name_or_path: str) -> None:
        """Warn when the encoder has no dropout: the two views would then be identical."""
        config = getattr(getattr(encoder, "backbone", None), "config", None)
        rates = [
            getattr(config, key)
            for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout")
            if isinstance(getattr(config, key, None), (int, float))
        ]
        if rates and max(rates) == 0:
            log.warning(
                "augmentation=dropout with dropout=0: both views are identical (SimCSE's 'no dropout' row)"
            )
