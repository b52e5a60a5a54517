"""Supervised SimCSE (Gao, Yao & Chen, EMNLP 2021, §4 and Eq. 5).

Training items are NLI triples (premise, entailment hypothesis, contradiction hypothesis) read
from SimCSE's ``nli_for_simcse.csv`` format. The entailment hypothesis is the premise's
positive; the candidates for premise i are all N entailment hypotheses of the batch plus all N
contradiction hypotheses (the "hard negatives"). The loss is the configured one — InfoNCE
(:func:`cl_bench.losses.infonce.info_nce`) called as ``loss(z_premise, z_entail, z_contra)`` —
so ``loss.tau`` (0.05) and ``loss.hard_negative_alpha`` (Table 7's weight α on the anchor's own
hard negative) apply. All sentences of a batch go through the encoder in one forward pass, as in
SimCSE's ``cl_forward``.

``method.guide=<encoder>`` adds a frozen guide encoder (Solatorio 2024; any local folder or hub id, checked
offline-safely before any model loads, pooled by ``method.guide_pooler``) that embeds the batch's sentences:

* with ``loss=gist`` the loss is GISTEmbed, sentence-transformers' ``GISTEmbedLoss`` (:func:`cl_bench.losses.gist.gist_embed`,
  given the guide's embeddings as ``guide=``);
* with ``loss=infonce`` (the default) it is *guided supervised SimCSE*: every candidate the guide scores at least as
  similar to the premise as the premise's own entailment is left out of that premise's denominator
  (:func:`cl_bench.losses.gist.guided_ignore_mask`, passed to the loss as ``ignore=``).

Both work with GradCache (``train.gradcache_chunk``): the guide's embeddings are cached with the chunk's, as
sentence-transformers' ``CachedGISTEmbedLoss``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cl_bench.data.nli import read_nli_triples
from cl_bench.losses.gist import guided_ignore_mask
from cl_bench.methods.base import Method, MethodContext, TextViews, tokenize_groups
from cl_bench.methods.simcse_sup.configuration import SupervisedSimCSESpec
from cl_bench.models.encoder import build_encoder
from cl_bench.models.mlm import mlm_head, with_mlm_term
from cl_bench.specs import loss_spec_of
from cl_bench.utils import distributed


@dataclass
class GuidedColumns(TextViews):
    """A prepared batch's columns, and the same texts tokenized for the guide encoder (None without a guide)."""

    guide_features: dict[str, torch.Tensor] | None = None


class SupervisedSimCSE(Method):
    """Supervised SimCSE on (premise, entailment[, contradiction]) items.

    Keys: declared on its spec (:class:`cl_bench.methods.simcse_sup.configuration.SupervisedSimCSESpec`; ``mlm_mode``:
    :mod:`cl_bench.models.mlm`); its ``loss`` is InfoNCE with ``hard_negative_alpha``, or GISTEmbed's (``loss=gist``).
    """

    def __init__(self, context: MethodContext, spec: SupervisedSimCSESpec) -> None:
        super().__init__(context, spec)
        self.mlm = mlm_head(self.encoder, context.model_name_or_path, spec.mlm_weight, spec.mlm_probability,
                            spec.mlm_mode)
        self.guide = None
        if spec.guide:
            if distributed.is_distributed():  # the mask is per process; the gathered loss would need it gathered
                raise ValueError("method.guide: not under torchrun (run it in one process)")

            self.guide = build_encoder(str(spec.guide), pooler=spec.guide_pooler, max_length=context.max_length,
                                       fresh_mlp=False)
            self.guide.requires_grad_(False)
            self.guide.eval()

    def train(self, mode: bool = True) -> SupervisedSimCSE:
        """Train mode for the trained modules; the guide stays frozen in eval mode (no dropout)."""
        super().train(mode)
        if self.guide is not None:
            self.guide.eval()
        return self

    def read_corpus(self, path: str) -> Sequence[tuple[str, ...]]:
        """Read the NLI CSV; with hard negatives every row must have the ``hard_neg`` column."""
        rows = read_nli_triples(path, limit=self.context.data.get("limit"))
        if self.spec.use_hard_negatives and len(rows[0]) != 3:
            raise ValueError(
                f"data.train_file: {path} has only sent0,sent1 columns but method.use_hard_negatives=true; "
                "use a sent0,sent1,hard_neg file or set method.use_hard_negatives=false"
            )
        return rows

    def prepare(self, items: list[tuple[str, ...]], rng: random.Random) -> GuidedColumns:
        """Premises, entailments (and contradictions) tokenized together, column after column (in a worker);
        for the guide's tokenizer too when there is a guide."""
        columns = 3 if self.spec.use_hard_negatives else 2
        texts = [[row[c] for row in items] for c in range(columns)]
        views = tokenize_groups(self.encoder, texts)
        guide_features = None
        if self.guide is not None:
            guide_features = self.guide.tokenize([text for column in texts for text in column])
        return GuidedColumns(views.size, views.features, guide_features)

    @torch.no_grad()
    def guide_embeddings(self, views: GuidedColumns) -> tuple[torch.Tensor, ...]:
        """The frozen guide's embeddings of the batch's columns (no graph)."""
        assert self.guide is not None and views.guide_features is not None
        device = self.guide.device
        return self.guide({k: v.to(device) for k, v in views.guide_features.items()}).split(views.size)

    def guided_loss(self, embeddings: Sequence[torch.Tensor], guide: Sequence[torch.Tensor]) -> torch.Tensor:
        """The configured loss: given the guide's embeddings (``loss=gist``), or the guide's mask of ignored columns
        (guided supervised SimCSE), or neither without a guide."""
        if self.guide is None:
            return self.loss_fn(*embeddings)
        spec = loss_spec_of(self.loss_fn)
        if spec is not None and spec.kind == "guided_pair":
            return self.loss_fn(*embeddings, guide=tuple(guide))
        return self.loss_fn(*embeddings, ignore=guided_ignore_mask(*guide))

    def training_step(self, batch: list[tuple[str, ...]] | TextViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        features = self.to_device(views.features)
        if self.mlm is not None:  # MLM masking draws from torch's RNG in the step, as dropout does
            features = self.mlm.contrastive_inputs(features)  # masked in mlm_mode=masked
        embeddings = self.encoder(features).split(views.size)
        guide = self.guide_embeddings(views) if self.guide is not None else ()
        return with_mlm_term(self.guided_loss(embeddings, guide), self.mlm, self.spec.mlm_weight, features)

    # GradCache hooks (cl_bench/train/gradcache.py)
    def gradcache_blocker(self) -> str | None:
        """Why this configuration cannot train with gradient caching, or None when it can."""
        if self.mlm is not None:
            return "method.mlm_weight > 0 (the MLM term needs the whole batch's graph); set method.mlm_weight=0"
        return None

    def cache_embed(self, batch: list[tuple[str, ...]]) -> tuple[torch.Tensor, ...]:
        """GradCache hook: a chunk's column embeddings, then the guide's (frozen: GradCache pushes nothing into them)."""
        views = self.prepare(batch, self.rng)
        embeddings = tuple(self.encoder(self.to_device(views.features)).split(views.size))
        return embeddings + (tuple(self.guide_embeddings(views)) if self.guide is not None else ())

    def cache_loss(self, embeddings: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
        """GradCache hook: the loss of the whole batch from its cached column (and guide) embeddings."""
        columns = 3 if self.spec.use_hard_negatives else 2
        contrastive = self.guided_loss(embeddings[:columns], embeddings[columns:])
        return {"loss": contrastive, "loss_contrastive": contrastive}
