"""ESimCSE (Wu et al., COLING 2022): SimCSE whose positive is the sentence with repeated words, plus a
momentum-encoder queue of extra negatives.

The official code's training step (caskcsg/sentemb ESimCSE at 5eeec55: train.py ``prepare_features``,
esimcse/models.py ``cl_forward`` l. 96-293, esimcse/trainers.py ``compute_loss`` l. 613-636), which
tests/methods/test_esimcse_reference.py checks in loss, gradients and queue against outputs of the official
functions:

* the two views are the sentence (first) and its word repetition (second; ``augmentation=word_repetition``,
  whose ``bpe`` rule is applied here to the token ids exactly as the official ``prepare_features``), encoded in
  one pass with dropout;
* the loss is InfoNCE of the first view against the second views *and* the queue: the queue's keys are passed
  to the configured pair loss as extra negatives of every anchor (the ``hard_negatives`` argument);
* after the loss, the momentum encoder (dropout off, no gradient) encodes the first view; pooled and put through
  the *online* MLP head (the official ``cls.mlp``), these keys join the queue, which keeps the last
  ``neg_size``. The queue starts empty (the first step has in-batch negatives only), as the official
  ``pre_z1 = None``.
* θ_m ← m·θ_m + (1−m)·θ after every optimizer step (:class:`~cl_bench.methods.base.MomentumMethod`); the
  official code updates at the start of the next forward pass, with the same parameters (and once before the
  first keys, with the starting parameters: done at build here, where it changes anything).

Where the momentum encoder starts (``method.momentum_start``) is the one choice the official *run* and the
official *idea* part on: ``BertForCL.__init__`` copies the online encoder before any weights are loaded, then
``init_weights()`` re-draws every module, and ``from_pretrained`` loads only ``bert.*`` — its own log
(ESimCSE/logs/bert-base-uncased.log) lists every ``momentum_model.*`` tensor as newly initialised. So the
official run's momentum encoder starts *random* and drifts toward the online encoder (``random``, what
experiment=esimcse_bert uses to reproduce the published figure); the paper describes a momentum copy of the
encoder, which is ``pretrained`` (this method's default).
"""

from __future__ import annotations

import random

import torch

from cl_bench.methods.base import (
    MethodContext,
    MomentumMethod,
    TextViews,
    encode_views,
    text_views,
    tokenize_groups,
)
from cl_bench.methods.esimcse.configuration import ESimCSESpec
from cl_bench.models.poolers import needs_hidden_states
from cl_bench.utils import distributed


class ESimCSE(MomentumMethod):
    """Word-repetition positives and a queue of momentum-encoded negatives.

    Keys: declared on its spec (:class:`cl_bench.methods.esimcse.configuration.ESimCSESpec`; ``momentum_start``: see
    the module docstring); a pair loss, the queue is its ``hard_negatives`` argument.
    """

    def __init__(self, context: MethodContext, spec: ESimCSESpec) -> None:
        super().__init__(context, spec)
        self.key_backbone = None
        if spec.neg_size > 0 and distributed.is_distributed():
            # the loss is gathered over ranks with its hard_negatives: the (already global) queue would repeat
            raise ValueError("method.neg_size: ESimCSE's queue runs in one process (official: one GPU); "
                             "train without torchrun or set method.neg_size=0")
        if spec.neg_size > 0:
            # the momentum copy of the backbone only: keys go through the online pooler and MLP, as the official
            self.key_backbone = self.momentum_copy(self.encoder.backbone)
            if spec.momentum_start == "random":
                self.redraw_momentum_encoder()
            self.init_queue(spec.neg_size, self.encoder.hidden_size, start_empty=True)

    @torch.no_grad()
    def redraw_momentum_encoder(self) -> None:
        """The official run's start: the momentum backbone re-drawn with the backbone's own initialisation
        (``_init_weights``, BERT's: normal(0, initializer_range) weights, zero biases, unit LayerNorms), then
        the update the official ``cl_forward`` makes before its first keys, θ_m ← m·θ_m + (1−m)·θ."""
        init = getattr(self.key_backbone, "_init_weights", None)
        if init is None:
            raise ValueError("method.momentum_start: random needs a transformers backbone with its own weight "
                             f"initialisation; {type(self.key_backbone).__name__} has none (LoRA?): use pretrained")
        for item in (*self.key_backbone.modules(), *self.key_backbone.parameters()):
            if getattr(item, "_is_hf_initialized", False):  # transformers skips what it marked loaded
                item._is_hf_initialized = False
        self.key_backbone.apply(init)
        self.momentum_update()

    def train(self, mode: bool = True) -> ESimCSE:
        """Train mode for the online encoder; the momentum encoder always runs without dropout."""
        super().train(mode)
        if self.key_backbone is not None:
            self.key_backbone.eval()
        return self

    # ----- views ------------------------------------------------------------------------------
    def prepare(self, items: list[str], rng: random.Random) -> TextViews:
        """The sentence and its augmented view, tokenized together. Word repetition's ``bpe`` rule acts on the
        token ids (the official inputs exactly); a text augmentation rewrites the second view's text."""
        aug, sentences = self.augmentation, list(items)
        if aug is not None and getattr(aug, "token_level", False):
            tokenizer = self.encoder.tokenizer
            ids = tokenizer(sentences, truncation=True, max_length=self.encoder.max_length)["input_ids"]
            rows = list(ids) + aug.repeat_token_ids(ids, rng)
            padded = tokenizer.pad({"input_ids": rows}, padding=True, return_tensors="pt")
            features = {"input_ids": padded["input_ids"], "attention_mask": padded["attention_mask"]}
            if "token_type_ids" in tokenizer.model_input_names:
                features["token_type_ids"] = torch.zeros_like(padded["input_ids"])
            return TextViews(len(sentences), features)
        return tokenize_groups(self.encoder, text_views(aug, sentences, rng, augment_first=False))

    # ----- training ---------------------------------------------------------------------------
    def training_step(self, batch: list[str] | TextViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        features, n = self.to_device(views.features), views.size
        z = encode_views(self.encoder, self.augmentation, features, n, self.rng)  # cutoffs: second view only
        z1, z2 = z[:n], z[n:]
        if self.key_backbone is None:
            return {"loss": self.loss_fn(z1, z2)}
        queued = self.queued_keys()
        loss = self.loss_fn(z1, z2, queued.to(z2.dtype)) if queued.shape[0] else self.loss_fn(z1, z2)
        self.pending_keys = self.momentum_keys({k: v[:n] for k, v in features.items()})
        return {"loss": loss, "queue_size": torch.tensor(float(queued.shape[0]))}

    @torch.no_grad()
    def momentum_keys(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """The first views through the momentum backbone (dropout off), then the online pooler and MLP head."""
        kwargs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        outputs = self.key_backbone(**kwargs, output_hidden_states=needs_hidden_states(self.encoder.pooler), return_dict=True)
        return self.encoder.pool_outputs(outputs, features["attention_mask"], apply_mlp=True).detach()
