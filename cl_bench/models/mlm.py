"""Masked-language-model auxiliary head sharing the encoder's backbone (SimCSE λ·ℓ_mlm, DeCLUTR)."""

from __future__ import annotations

import torch
from torch import nn

from cl_bench.models.encoder import SentenceEncoder, special_tokens_mask


class MLMHead(nn.Module):
    """An ``AutoModelForMaskedLM`` whose base model *is* the encoder's backbone (shared weights).

    The LM head is loaded from ``name_or_path`` when the checkpoint has one, else freshly
    initialised (e.g. sentence-tuned checkpoints saved as a bare ``BertModel``).
    """

    def __init__(self, encoder: SentenceEncoder, name_or_path: str, mlm_probability: float = 0.15) -> None:
        super().__init__()
        from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

        mlm_model = AutoModelForMaskedLM.from_pretrained(name_or_path, config=encoder.backbone.config)
        # Share the backbone: swap the MLM model's base model for the encoder's, then re-tie the
        # decoder to the shared word embeddings.
        setattr(mlm_model, mlm_model.base_model_prefix, encoder.backbone)
        mlm_model.tie_weights()
        # Only the LM head is registered here; the backbone is registered by the encoder.
        self._mlm_model = [mlm_model]
        self.lm_head = _lm_head_module(mlm_model)
        self.tokenizer = encoder.tokenizer
        self.collator = DataCollatorForLanguageModeling(encoder.tokenizer, mlm_probability=mlm_probability)

    def mask(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """BERT masking (80% [MASK], 10% random, 10% kept) of a copy; returns (inputs, labels)."""
        special = special_tokens_mask(self.tokenizer, input_ids).cpu()
        inputs, labels = self.collator.torch_mask_tokens(input_ids.cpu().clone(), special_tokens_mask=special)
        return inputs.to(input_ids.device), labels.to(input_ids.device)

    def loss(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """MLM cross-entropy on a freshly masked copy of ``features`` (one extra forward pass)."""
        inputs, labels = self.mask(features["input_ids"])
        masked = dict(features, input_ids=inputs)
        outputs = self._mlm_model[0](**{k: v for k, v in masked.items() if k != "special_tokens_mask"}, labels=labels)
        return outputs.loss


def with_mlm_term(
    contrastive: torch.Tensor, mlm: MLMHead | None, weight: float, features: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Loss terms ``{"loss", "loss_contrastive"[, "loss_mlm"]}``: contrastive + weight × MLM (when a head is set)."""
    terms = {"loss": contrastive, "loss_contrastive": contrastive}
    if mlm is not None:
        terms["loss_mlm"] = mlm.loss(features)
        terms["loss"] = contrastive + weight * terms["loss_mlm"]
    return terms


def _lm_head_module(mlm_model: nn.Module) -> nn.Module:
    for name in ("cls", "lm_head", "vocab_projector", "predictions"):
        if hasattr(mlm_model, name):
            return getattr(mlm_model, name)
    raise ValueError(f"{type(mlm_model).__name__}: no MLM head found")
