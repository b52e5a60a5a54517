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

from cl_bench.augment.specs import DropoutSpec
from cl_bench.models.encoder import DROPOUT_KEYS
from cl_bench.specs import AugmentationSpec

log = logging.getLogger(__name__)


class Augmentation:
    """Identity augmentation; subclasses override one of the hooks and receive their option's spec.

    An option's keys, its name and what it does (rewrites text, edits embeddings) are its spec's
    (:class:`cl_bench.specs.AugmentationSpec`; each key's default, rule and doc declared there, the values
    ``conf/augmentation/<name>.yaml`` changes applied), built and
    checked by :func:`cl_bench.specs.build` or, from Python, :func:`cl_bench.config.yaml_spec`.
    """

    def __init__(self, spec: AugmentationSpec) -> None:
        self.spec = spec

    @property
    def name(self) -> str:
        """The option's name in ``conf/augmentation/``, for messages."""
        return self.spec.name

    @property
    def embedding_level(self) -> bool:
        """True when :meth:`augment_inputs` does the work (the method must then run the encoder from
        ``inputs_embeds``, or through :func:`cl_bench.augment.cutoff.encode_with_embedding_augmentation`)."""
        return self.spec.embedding_level

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


class Dropout(Augmentation):
    """SimCSE's default: no text change; the two views differ only by the encoder's dropout masks."""

    spec: DropoutSpec

    def setup(self, encoder: Any, model_name_or_path: str) -> None:
        """Warn when the encoder has no dropout: the two views would then be identical."""
        config = getattr(getattr(encoder, "backbone", None), "config", None)
        rates = [getattr(config, key) for key in DROPOUT_KEYS if isinstance(getattr(config, key, None), (int, float))]
        if rates and max(rates) == 0:
            log.warning(
                "augmentation=dropout with dropout=0: both views are identical (SimCSE's 'no dropout' row)"
            )
