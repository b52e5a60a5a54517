"""Cutoff (Shen et al., 2020): erase tokens, feature dimensions or a span of the input embeddings.

As in the authors' code (``transformers/trainer.py`` of dinghanshen/Cutoff), cutoff acts on the
embedding-layer output (word + position + segment embeddings after LayerNorm), per sentence:

* token cutoff: ``int(L * rate)`` tokens are zeroed and removed from the attention mask;
* span cutoff: one contiguous span of ``int(L * rate)`` tokens, starting at
  ``floor(U * (L - length))``, is zeroed and removed from the attention mask;
* feature cutoff: ``int(H * rate)`` of the H hidden dimensions are zeroed in every token; the
  attention mask is kept.

L counts the sentence's real tokens. Two deliberate differences from that code: special tokens
([CLS], [SEP], ...) are never cut and do not count in L, and token/feature indices are drawn
without replacement, so exactly ``int(L * rate)`` tokens (``int(H * rate)`` features) are cut.

:func:`encode_with_embedding_augmentation` runs an encoder with the cutoff applied at that level;
``augment_embeddings`` applies the same cutoff to whatever embeddings it is given (for methods
that pass word embeddings as ``inputs_embeds``).
"""

from __future__ import annotations

import abc
from typing import Any

import torch

from cl_bench.augment.base import Augmentation
from cl_bench.augment.specs import CutoffSpec, FeatureCutoffSpec, SpanCutoffSpec, TokenCutoffSpec
from cl_bench.models.encoder import special_tokens_mask as find_special_tokens


class Cutoff(Augmentation, abc.ABC):
    """Base of the three cutoffs: samples which tokens and features to keep, then applies it."""

    spec: CutoffSpec
    #: whether erased tokens also leave the attention mask (False for feature cutoff, which erases no token)
    erases_tokens = True

    @abc.abstractmethod
    def sample_row(
        self, content: torch.Tensor, hidden_size: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """For one sentence with content-token positions ``content``: (positions to erase, features to erase)."""

    def sample_keep_masks(
        self,
        attention_mask: torch.Tensor,
        special_tokens_mask: torch.Tensor,
        hidden_size: int,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Boolean (B, T) token-keep and (B, T, H) feature-keep masks, drawn on the CPU from ``generator``."""
        content_mask = attention_mask.bool().cpu() & ~special_tokens_mask.bool().cpu()
        batch, length = content_mask.shape
        keep_tokens = torch.ones(batch, length, dtype=torch.bool)
        keep_features = torch.ones(batch, length, hidden_size, dtype=torch.bool)
        for row in range(batch):
            content = content_mask[row].nonzero().squeeze(1)
            erased_tokens, erased_features = self.sample_row(content, hidden_size, generator)
            keep_tokens[row, erased_tokens] = False
            if erased_features is not None:
                keep_features[row, content[:, None], erased_features[None, :]] = False
        return keep_tokens, keep_features

    def augment_inputs(
        self,
        embeddings: torch.Tensor,
        attention_mask: torch.Tensor,
        special_tokens_mask: torch.Tensor,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero the erased tokens/features of ``embeddings`` (B, T, H); erased tokens leave the mask."""
        keep_tokens, keep_features = self.sample_keep_masks(
            attention_mask, special_tokens_mask, embeddings.shape[-1], generator
        )
        keep_tokens, keep_features = keep_tokens.to(embeddings.device), keep_features.to(embeddings.device)
        keep = keep_features & keep_tokens[..., None]
        augmented = embeddings * keep.to(embeddings.dtype)
        mask = attention_mask * keep_tokens.to(attention_mask.dtype) if self.erases_tokens else attention_mask
        return augmented, mask

    def augment_embeddings(
        self,
        embeddings: torch.Tensor,
        attention_mask: torch.Tensor,
        special_tokens_mask: torch.Tensor,
        generator: torch.Generator,
    ) -> torch.Tensor:
        """The cutoff on ``embeddings`` alone (the attention mask change is dropped)."""
        return self.augment_inputs(embeddings, attention_mask, special_tokens_mask, generator)[0]


class TokenCutoff(Cutoff):
    """Erase ``int(L * rate)`` random tokens (rows of the embedding matrix)."""

    spec: TokenCutoffSpec

    def sample_row(self, content, hidden_size, generator):
        count = int(len(content) * self.spec.rate)
        return content[torch.randperm(len(content), generator=generator)[:count]], None


class SpanCutoff(Cutoff):
    """Erase one contiguous span of ``int(L * rate)`` tokens."""

    spec: SpanCutoffSpec

    def sample_row(self, content, hidden_size, generator):
        count = int(len(content) * self.spec.rate)
        start = int(torch.rand(1, generator=generator).item() * (len(content) - count))
        return content[start : start + count], None


class FeatureCutoff(Cutoff):
    """Erase ``int(H * rate)`` random hidden dimensions (columns) in every content token."""

    spec: FeatureCutoffSpec
    erases_tokens = False

    def sample_row(self, content, hidden_size, generator):
        count = int(hidden_size * self.spec.rate)
        return content[:0], torch.randperm(hidden_size, generator=generator)[:count]


def _embedding_layer(backbone: torch.nn.Module) -> torch.nn.Module:
    """The module whose output is the transformer's input (``embeddings`` in BERT/RoBERTa/DistilBERT/MPNet)."""
    layer = getattr(backbone, "embeddings", None)
    if not isinstance(layer, torch.nn.Module):
        raise ValueError(
            f"augmentation: {type(backbone).__name__} has no `embeddings` module to apply cutoff to"
        )
    return layer


def encode_with_embedding_augmentation(
    encoder: Any,
    features: dict[str, torch.Tensor],
    augmentation: Augmentation,
    start: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """Encode a tokenized batch; rows ``start:`` get ``augmentation`` on their embedding-layer output.

    The augmented rows' embedding output is computed, passed to
    :meth:`~cl_bench.augment.base.Augmentation.augment_inputs` (with their attention and
    special-token masks), and substituted into the encoder's forward pass with a forward hook; the
    returned attention mask is used by the transformer and the pooler for those rows.

    Args:
        encoder: a :class:`~cl_bench.models.encoder.SentenceEncoder`.
        features: tokenized batch (``input_ids``, ``attention_mask``, ...), both views stacked.
        augmentation: an embedding-level augmentation.
        start: index of the first row to augment (SimCSE: the second view).
        generator: CPU RNG of the cutoff choices.

    Returns:
        (B, H) sentence vectors.
    """
    layer = _embedding_layer(encoder.backbone)
    input_ids = features["input_ids"]
    special = find_special_tokens(encoder.tokenizer, input_ids)
    embedding_inputs = {"input_ids": input_ids[start:]}
    if "token_type_ids" in features:
        embedding_inputs["token_type_ids"] = features["token_type_ids"][start:]
    augmented, augmented_mask = augmentation.augment_inputs(
        layer(**embedding_inputs), features["attention_mask"][start:], special[start:], generator
    )
    features = dict(features, attention_mask=torch.cat([features["attention_mask"][:start], augmented_mask]))

    def substitute(module: torch.nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        return torch.cat([output[:start], augmented.to(output.dtype)])

    handle = layer.register_forward_hook(substitute)
    try:
        return encoder(features)
    finally:
        handle.remove()
