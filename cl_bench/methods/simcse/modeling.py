"""Unsupervised SimCSE (Gao, Yao & Chen, EMNLP 2021).

Each sentence goes through the encoder twice in one forward pass, so the two copies get
independent dropout masks; the other sentences' second views are the negatives (Eq. 4).
An optional MLM auxiliary loss is added with weight ``mlm_weight`` (λ, Table D.2).
"""

from __future__ import annotations

import random
from typing import Any

import torch

from cl_bench.methods.base import Method, MethodContext, TextViews, encode_views, text_views, tokenize_groups
from cl_bench.methods.simcse.configuration import SimCSESpec
from cl_bench.models.encoder import SentenceEncoder
from cl_bench.models.mlm import mlm_head, with_mlm_term


class SimCSE(Method):
    """Two views of each sentence, InfoNCE over in-batch negatives.

    Keys: declared on its spec (:class:`cl_bench.methods.simcse.configuration.SimCSESpec`); ``mlm_mode`` is
    implemented in :mod:`cl_bench.models.mlm`.
    """

    def __init__(self, context: MethodContext, spec: SimCSESpec) -> None:
        super().__init__(context, spec)
        if spec.fixed_dropout_mask and self.augmentation is not None and self.augmentation.embedding_level:
            raise ValueError("method.fixed_dropout_mask: cannot be combined with an embedding-level augmentation")
        self.mlm = mlm_head(self.encoder, context.model_name_or_path, spec.mlm_weight, spec.mlm_probability,
                            spec.mlm_mode)

    def selection_encoder(self) -> SentenceEncoder:
        """With ``select_with_mlp``: the encoder's modules, its MLP applied at evaluation (the dev embedding of
        MixCSE's official script); else the evaluation encoder."""
        encoder = self.eval_encoder()
        if not self.spec.select_with_mlp or encoder.mlp is None or not encoder.mlp_only_train:
            return encoder
        with_mlp = SentenceEncoder(encoder.backbone, encoder.tokenizer, encoder.pooler, encoder.mlp, False,
                                   encoder.max_length, encoder.first_layer, encoder.prompt, encoder.include_prompt,
                                   encoder.prompt_period)
        with_mlp.view_prompts = list(encoder.view_prompts)
        return with_mlp.train(encoder.training)  # a new module starts in training mode: take the encoder's

    def make_views(self, sentences: list[str], rng: random.Random | None = None) -> tuple[list[str], list[str]]:
        """Text views of the batch (identical for dropout-only SimCSE), drawn from ``rng`` (default the method's)."""
        return text_views(self.augmentation, sentences, rng or self.rng, augment_first=self.spec.augment_both_views)

    def prepare(self, items: list[str], rng: random.Random) -> TextViews:
        """The two text views and their token ids (CPU), as one DataLoader worker makes them."""
        return tokenize_groups(self.encoder, self.make_views(items, rng))

    def embed_views(self, first: list[str], second: list[str]) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Encode two lists of text views in one forward pass (independent dropout masks per copy)."""
        return self.embed_prepared(tokenize_groups(self.encoder, (first, second)))

    def embed_prepared(self, views: TextViews) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Encode a prepared batch's two views in one forward pass (independent dropout masks per copy)."""
        features, n = self.to_device(views.features), views.size
        if self.mlm is not None:
            features = self.mlm.contrastive_inputs(features)  # masked in mlm_mode=masked
        # fixed dropout mask (Table 3 "fixed 0.1"; never with an embedding-level augmentation: __init__ rejects it)
        if self.spec.fixed_dropout_mask:
            z1, z2 = self._encode_views_same_mask(features, n)
            return z1, z2, features
        # Shen et al.'s cutoffs act on the second view's embedding-layer output (and mask)
        z = encode_views(self.encoder, self.augmentation, features, n, self.rng)
        return z[:n], z[n:], features

    # fixed dropout mask and GradCache hooks (cl_bench/train/gradcache.py)
    def _encode_views_same_mask(self, features: dict[str, torch.Tensor], n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Encode rows ``[:n]`` and ``[n:]`` in two passes that replay the same RNG state.

        Both halves were tokenized together, so they have the same shape; dropout then draws the
        same mask for both. The global RNG ends where one pass would leave it.
        """
        halves = [{k: v[:n] for k, v in features.items()}, {k: v[n:] for k, v in features.items()}]
        device = self.encoder.device
        cuda_devices = [device] if device.type == "cuda" else []
        cpu_state = torch.get_rng_state()
        cuda_states = [torch.cuda.get_rng_state(d) for d in cuda_devices]
        z1 = self.encoder(halves[0])
        with torch.random.fork_rng(devices=cuda_devices):  # restores the post-z1 state on exit
            torch.set_rng_state(cpu_state)
            for d, state in zip(cuda_devices, cuda_states, strict=True):
                torch.cuda.set_rng_state(state, d)
            z2 = self.encoder(halves[1])
        return z1, z2

    def gradcache_blocker(self) -> str | None:
        """Why this configuration cannot train with gradient caching, or None when it can."""
        if self.mlm is not None:
            return "method.mlm_weight > 0 (the MLM term needs the whole batch's graph); set method.mlm_weight=0"
        return None

    def cache_embed(self, batch: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """GradCache hook: the two views' embeddings of a chunk of the batch (rows follow ``batch``)."""
        z1, z2, _ = self.embed_prepared(self.prepare(batch, self.rng))
        return z1, z2

    def cache_loss(self, embeddings: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
        """GradCache hook: the loss terms of the whole batch from its (cached) embeddings."""
        contrastive = self.loss_fn(*embeddings)
        return {"loss": contrastive, "loss_contrastive": contrastive}

    def training_step(self, batch: list[str] | TextViews) -> dict[str, torch.Tensor]:
        z1, z2, features = self.embed_prepared(self.prepared(batch))
        return with_mlm_term(self.loss_fn(z1, z2), self.mlm, self.spec.mlm_weight, features)

