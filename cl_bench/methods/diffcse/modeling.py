"""DiffCSE (Chuang et al., NAACL 2022): SimCSE plus a conditional ELECTRA objective.

As the official code ran it (voidism/DiffCSE at f724b2c: diffcse/models.py ``cl_init``/``cl_forward``
l. 112-262, ``ProjectionMLP`` l. 35-50; train.py l. 376-388 and the collator's ``mask_tokens`` l. 499-545;
modeling_bert.py l. 960-961; run_diffcse.sh):

* SimCSE's two dropout views of each sentence, pooled, then — with ``pooler=cls`` — the projector
  (``--batchnorm``: Linear(H, 2H, no bias)–BatchNorm–ReLU–Linear(2H, H, no bias)–BatchNorm(affine=False),
  used in training only, ``--mlp_only_train``); the configured pair loss (InfoNCE, τ 0.05) on them;
* each view's token ids masked again (80% [MASK] / 10% random / 10% kept, rate ``mask_ratio``; 0.30 for
  BERT), a frozen masked-LM *generator* (``method.generator``; DistilBERT for BERT) fills the masks with its
  arg-max token, position 0 is set back to [CLS], padding to id 0;
* a *discriminator* — a second copy of the encoder's checkpoint, trained — reads the edited sentence with its
  position-0 embedding-layer output replaced by the view's sentence embedding (after the projector) and a
  Linear(H, 2) head predicts, token by token, whether the generator replaced it (label: generated id !=
  original id, on attended positions);
* loss = contrastive + λ · cross-entropy of those predictions over every position of the padded batch
  (the official mean includes padding, whose label is 0); λ = ``lambda_weight`` (0.005 for BERT).

The generator runs in the module's train/eval mode, as the official (it is a submodule of the model the
Trainer puts in train mode: its dropout is active while training); it gets no gradient and no update.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from cl_bench.methods.base import (
    Method,
    MethodContext,
    TextViews,
    tokenize_groups,
)
from cl_bench.methods.diffcse.configuration import DiffCSESpec, check_generator_reachable
from cl_bench.models.encoder import special_tokens_mask
from cl_bench.models.hub import ModelLoadError
from cl_bench.specs import RunSetting


class BatchNormProjector(nn.Module):
    """DiffCSE's ``ProjectionMLP``: Linear(H, 2H)–BN–ReLU–Linear(2H, H)–BN without affine, no biases."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(hidden_size, 2 * hidden_size, bias=False), nn.BatchNorm1d(2 * hidden_size), nn.ReLU(),
            nn.Linear(2 * hidden_size, hidden_size, bias=False), nn.BatchNorm1d(hidden_size, affine=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def load_generator(name_or_path: str) -> nn.Module:
    """The frozen masked LM that fills the masks (no gradient)."""
    from transformers import AutoModelForMaskedLM

    check_generator_reachable(name_or_path)
    try:
        generator = AutoModelForMaskedLM.from_pretrained(name_or_path)
    except OSError as err:
        raise ModelLoadError(f"method.generator: cannot load '{name_or_path}': {err}") from err
    generator.requires_grad_(False)
    return generator


def replaced_token_loss(logits: torch.Tensor, replaced: torch.Tensor) -> torch.Tensor:
    """Conditional ELECTRA's loss: mean cross-entropy of (B, T, 2) logits against the (B, T) replaced labels,
    over every position (padding included, label 0), as the official ``loss_fct(scores.view(-1, 2), labels)``."""
    return F.cross_entropy(logits.reshape(-1, 2).float(), replaced.reshape(-1).long())


class DiffCSE(Method):
    """SimCSE + a discriminator, conditioned on the sentence embedding, that detects a generator's edits.

    Keys: declared on its spec (:class:`cl_bench.methods.diffcse.configuration.DiffCSESpec`); a pair loss (SimCSE's
    InfoNCE).
    """

    def __init__(self, context: MethodContext, spec: DiffCSESpec) -> None:
        super().__init__(context, spec)
        encoder, hidden = self.encoder, self.encoder.hidden_size
        self.projector: nn.Module | None = None
        if encoder.pooler == "cls" and spec.projector == "batchnorm":
            # the saved encoder cannot hold a BatchNorm projector: the spec's rule (the preflight ran it already; a
            # method built from Python runs it here)
            spec.check_setting(RunSetting(pooler=encoder.pooler, mlp_only_train=bool(encoder.mlp_only_train)))
            self.projector = BatchNormProjector(hidden)
        self.generator: nn.Module | None = None
        if spec.lambda_weight > 0:
            self.generator = load_generator(spec.generator or context.model_name_or_path)
            vocab = int(encoder.backbone.config.vocab_size)
            if int(self.generator.config.vocab_size) != vocab:
                raise ValueError(f"method.generator: its vocabulary ({self.generator.config.vocab_size} ids) is not "
                                 f"the encoder's ({vocab}); use a masked LM with the encoder's tokenizer")
            # the discriminator starts from the encoder's checkpoint (official: BertForPreTraining's bert weights)
            self.discriminator = copy.deepcopy(encoder.backbone)
            self.electra_head = nn.Linear(hidden, 2)
            from transformers import DataCollatorForLanguageModeling

            self.collator = DataCollatorForLanguageModeling(encoder.tokenizer, mlm_probability=spec.mask_ratio)
            self._condition: torch.Tensor | None = None
            self.discriminator.embeddings.register_forward_hook(self._put_sentence_embedding)

    def _put_sentence_embedding(self, module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        """The discriminator's embedding-layer output with position 0 replaced by the sentence embedding
        (the official modeling_bert.py ``cls_input``)."""
        if self._condition is None:
            return output
        return torch.cat([self._condition.unsqueeze(1).to(output.dtype), output[:, 1:]], dim=1)

    def prepare(self, items: list[str], rng: random.Random) -> TextViews:
        """Two copies of each sentence, tokenized together (their dropout masks differ in the step)."""
        return tokenize_groups(self.encoder, (list(items), list(items)))

    def embed(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Pooled views, through the projector (``pooler=cls``: the BatchNorm one, or the encoder's MLP)."""
        if self.projector is None:
            return self.encoder(features)
        return self.projector(self.encoder(features, apply_mlp=False))

    def mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """BERT masking (80% [MASK], 10% random, 10% kept) of a copy at ``mask_ratio``, special tokens never."""
        special = special_tokens_mask(self.encoder.tokenizer, input_ids).cpu()
        masked, _ = self.collator.torch_mask_tokens(input_ids.cpu().clone(), special_tokens_mask=special)
        return masked.to(input_ids.device)

    def edit(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The generator's edit of the masked ids and the replaced labels ((B, T) each)."""
        with torch.no_grad():
            predicted = self.generator(input_ids=self.mask(input_ids), attention_mask=attention_mask).logits.argmax(-1)
        predicted[:, 0] = self.encoder.tokenizer.cls_token_id
        replaced = (predicted != input_ids) & attention_mask.bool()
        return predicted * attention_mask, replaced

    def electra_loss(self, features: dict[str, torch.Tensor], condition: torch.Tensor) -> dict[str, torch.Tensor]:
        """Replaced-token detection by the discriminator conditioned on ``condition`` (one row per sequence)."""
        edited, replaced = self.edit(features["input_ids"], features["attention_mask"])
        kwargs = {k: v for k, v in features.items() if k in ("attention_mask", "token_type_ids")}
        self._condition = condition
        try:
            hidden = self.discriminator(input_ids=edited, **kwargs, return_dict=True).last_hidden_state
        finally:
            self._condition = None
        logits = self.electra_head(hidden)
        with torch.no_grad():
            accuracy = ((logits.argmax(-1) == replaced.long()) & features["attention_mask"].bool()).sum() / features[
                "attention_mask"].sum()
        return {"loss_electra": replaced_token_loss(logits, replaced), "electra_acc": accuracy.float(),
                "replaced_rate": replaced.float().sum() / features["attention_mask"].sum()}

    def training_step(self, batch: list[str] | TextViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        features, n = self.to_device(views.features), views.size
        z = self.embed(features)  # encoded first: the masking below draws no RNG the views depend on
        contrastive = self.loss_fn(z[:n], z[n:])
        terms = {"loss": contrastive, "loss_contrastive": contrastive}
        if self.generator is not None:
            terms.update(self.electra_loss(features, z))
            terms["loss"] = contrastive + self.spec.lambda_weight * terms["loss_electra"]
        return terms
