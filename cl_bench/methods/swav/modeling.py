"""SwAV (Caron et al., NeurIPS 2020) on sentences.

Two views of each sentence (dropout and/or a text or cutoff augmentation) go through the encoder
and a projection head (Linear–BN–ReLU–Linear, the official ``--hidden_mlp 2048 --feat_dim 128``);
the L2-normalised projections are scored against K prototypes (a bias-free Linear whose rows are
re-normalised before every step, as the official code does), and the loss (``loss=swav``) makes
each view predict the other's Sinkhorn-Knopp codes. The prototypes are frozen for the first
``freeze_prototypes_steps`` steps (official: 313 iterations). The official code's queue of past
features for small batches is not implemented: batches must be large enough on their own.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

from cl_bench.methods.base import (
    Method,
    MethodContext,
    TextViews,
    encode_views,
    mlp_head,
    text_views,
    tokenize_groups,
)
from cl_bench.methods.swav.configuration import SwAVSpec


class SwAV(Method):
    """Swapped prediction of prototype assignments between two views (its loss is ``swav``).

    Keys: declared on its spec (:class:`cl_bench.methods.swav.configuration.SwAVSpec`).
    """

    def __init__(self, context: MethodContext, spec: SwAVSpec) -> None:
        super().__init__(context, spec)
        self.projection = mlp_head(self.encoder.hidden_size, spec.projection)
        self.prototypes = nn.Linear(int(spec.projection[-1]), spec.num_prototypes, bias=False)
        self.register_buffer("steps_done", torch.zeros((), dtype=torch.long))
        self.normalize_prototypes()

    @torch.no_grad()
    def normalize_prototypes(self) -> None:
        """Project the prototypes back onto the unit sphere (before every step, as the official code)."""
        self.prototypes.weight.copy_(F.normalize(self.prototypes.weight, dim=1))

    def prepare(self, items: list[str], rng: random.Random) -> TextViews:
        """The two text views, tokenized together (in a DataLoader worker)."""
        return tokenize_groups(self.encoder, text_views(self.augmentation, items, rng))

    def training_step(self, batch: list[str] | TextViews) -> dict[str, torch.Tensor]:
        self.normalize_prototypes()
        views = self.prepared(batch)
        n = views.size
        z = encode_views(self.encoder, self.augmentation, self.to_device(views.features), n, self.rng)
        prototypes = self.prototypes.weight
        if int(self.steps_done) < self.spec.freeze_prototypes_steps:
            prototypes = prototypes.detach()  # no gradient: the optimizer leaves them as they are
        scores = F.normalize(self.projection(z), dim=1) @ prototypes.T
        loss = self.loss_fn(scores[:n], scores[n:])
        return {"loss": loss}

    def on_after_step(self) -> None:
        self.steps_done.add_(1)
