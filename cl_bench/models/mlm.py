"""Masked-language-model auxiliary head sharing the encoder's backbone (SimCSE λ·ℓ_mlm, DeCLUTR).

Two modes (``method.mlm_mode``):

* ``clean``: the contrastive views are the clean inputs; the MLM loss is computed on a separately
  masked copy; the LM head's decoder is tied to the encoder's word embeddings (HF's
  ``AutoModelForMaskedLM`` default).
* ``masked``: what SimCSE's training code did before its PR #121 (commit a0867f4, 2021-11-23, the
  code behind the paper's "w/ MLM" rows and the λ ablation): ``mask_tokens`` in train.py masked the
  batch's ``input_ids`` in place, so the contrastive forward pass saw the MLM-masked inputs (each
  copy of a sentence masked independently) and the MLM loss used those same inputs; and its LM head
  (``BertForCL.lm_head = BertLMPredictionHead``) is not tied to the word embeddings: train.py copies
  BERT's pretrained ``cls.predictions`` weights into it (RoBERTa's ``lm_head`` loads from the
  checkpoint), then both train apart.
* ``untied``: SimCSE's training code at its latest commit (49fa580, after PR #121): the contrastive
  views are the clean inputs and the MLM loss uses a separately masked copy (``mlm_input_ids``,
  train.py l. 485), while ``BertForCL.lm_head`` is still its own ``BertLMPredictionHead`` (simcse/models.py
  l. 284) loaded from the checkpoint's ``cls.predictions`` (train.py l. 373): clean inputs *and* an
  untied decoder, so the word embeddings get no gradient through the LM decoder.
"""

from __future__ import annotations

import torch
from torch import nn

from cl_bench.models.encoder import SentenceEncoder, special_tokens_mask
from cl_bench.specs import MlmMode

#: key of the MLM labels in a features dict whose ``input_ids`` were masked for the contrastive views too
MLM_LABELS = "mlm_labels"


class MLMHead(nn.Module):
    """An ``AutoModelForMaskedLM`` whose base model *is* the encoder's backbone (shared weights).

    The LM head is loaded from ``name_or_path`` when the checkpoint has one, else freshly
    initialised (e.g. sentence-tuned checkpoints saved as a bare ``BertModel``). In ``clean`` mode its
    decoder is tied to the shared word embeddings; in ``masked`` and ``untied`` modes (SimCSE's official
    code before and after its PR #121) the decoder is its own parameter, a copy of the pretrained
    decoder weights.
    """

    def __init__(
        self, encoder: SentenceEncoder, name_or_path: str, mlm_probability: float = 0.15, mode: str = "clean"
    ) -> None:
        super().__init__()
        from transformers import AutoModelForMaskedLM, DataCollatorForLanguageModeling

        if mode not in list(MlmMode):
            raise ValueError(f"method.mlm_mode: unknown '{mode}'; valid: {', '.join(MlmMode)}")
        self.mode = mode
        mlm_model = AutoModelForMaskedLM.from_pretrained(name_or_path, config=encoder.backbone.config)
        # Share the backbone: swap the MLM model's base model for the encoder's.
        setattr(mlm_model, mlm_model.base_model_prefix, encoder.backbone)
        decoder = mlm_model.get_output_embeddings()
        if mode == "clean":
            mlm_model.tie_weights()  # re-tie the decoder to the shared word embeddings
        else:  # untied, as BertForCL.lm_head: the decoder starts from the checkpoint's weights, then trains apart
            decoder.weight = nn.Parameter(decoder.weight.detach().clone())
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

    def contrastive_inputs(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The features the contrastive views are encoded from: masked (with their labels) in ``masked`` mode."""
        if self.mode != "masked":  # clean and untied: the views see the clean inputs
            return features
        inputs, labels = self.mask(features["input_ids"])
        return dict(features, input_ids=inputs, **{MLM_LABELS: labels})

    def loss(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """MLM cross-entropy (one extra forward pass) on the already masked ``features`` when they carry
        their labels (``masked`` mode), else on a freshly masked copy."""
        if MLM_LABELS in features:
            inputs, labels = features["input_ids"], features[MLM_LABELS]
        else:
            inputs, labels = self.mask(features["input_ids"])
        model_inputs = {k: v for k, v in features.items() if k not in ("special_tokens_mask", MLM_LABELS)}
        return self._mlm_model[0](**dict(model_inputs, input_ids=inputs), labels=labels).loss


def mlm_head(
    encoder: SentenceEncoder, name_or_path: str, weight: float, probability: float, mode: str
) -> MLMHead | None:
    """The MLM head of a method with ``method.mlm_weight``/``mlm_probability``/``mlm_mode``; None when the weight is 0.

    Raises:
        ValueError: ``mlm_mode=masked`` with ``mlm_weight=0`` (nothing would be masked: the option would not act).
    """
    if mode not in list(MlmMode):
        raise ValueError(f"method.mlm_mode: unknown '{mode}'; valid: {', '.join(MlmMode)}")
    if weight <= 0:
        if mode == "masked":
            raise ValueError("method.mlm_mode: 'masked' needs method.mlm_weight > 0 (without MLM nothing is masked)")
        return None
    return MLMHead(encoder, name_or_path, probability, mode)


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
