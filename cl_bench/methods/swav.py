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
from collections.abc import Sequence

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


class SwAV(Method):
    """Swapped prediction of prototype assignments between two views.

    Args:
        context: shared build context (its loss is ``swav``).
        projection: output sizes of the projection head's layers (official: 2048-128).
        num_prototypes: K (official ImageNet: 3000).
        freeze_prototypes_steps: optimizer steps during which the prototypes get no update (official: 313).
    """

    name = "swav"

    def __init__(
        self,
        context: MethodContext,
        projection: Sequence[int] = (2048, 128),
        num_prototypes: int = 3000,
        freeze_prototypes_steps: int = 313,
    ) -> None:
        super().__init__(context)
        self.projection = mlp_head(self.encoder.hidden_size, list(projection))
        self.prototypes = nn.Linear(int(projection[-1]), num_prototypes, bias=False)
        self.freeze_prototypes_steps = int(freeze_prototypes_steps)
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
        if int(self.steps_done) < self.freeze_prototypes_steps:
            prototypes = prototypes.detach()  # no gradient: the optimizer leaves them as they are
        scores = F.normalize(self.projection(z), dim=1) @ prototypes.T
        loss = self.loss_fn(scores[:n], scores[n:])
        return {"loss": loss}

    def on_after_step(self) -> None:
        self.steps_done.add_(1)
