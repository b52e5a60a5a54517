"""Barlow Twins (Zbontar et al., ICML 2021) on sentences.

Two views of each sentence (two dropout masks in one forward pass, and/or any text or cutoff
augmentation) go through the encoder and a projector (Linear–BN–ReLU blocks, then a Linear; the
official code's ``--projector 8192-8192-8192``, biases off); the loss (``loss=barlow_twins``)
drives the cross-correlation of the two views' projections to the identity. No negatives, no
temperature. The projector is used in training only: the evaluated encoder is the sentence encoder.
"""

from __future__ import annotations

import random

import torch

from cl_bench.methods.barlow_twins.configuration import BarlowTwinsSpec
from cl_bench.methods.base import (
    Method,
    MethodContext,
    TextViews,
    apply_head,
    encode_views,
    mlp_head,
    text_views,
    tokenize_groups,
)


class BarlowTwins(Method):
    """Redundancy reduction between two views' projections (its loss is ``barlow_twins``).

    Keys: declared on its spec (:class:`cl_bench.methods.barlow_twins.configuration.BarlowTwinsSpec`).
    """

    def __init__(self, context: MethodContext, spec: BarlowTwinsSpec) -> None:
        super().__init__(context, spec)
        self.projector = mlp_head(self.encoder.hidden_size, spec.projector, last_bias=False, hidden_bias=False)

    def prepare(self, items: list[str], rng: random.Random) -> TextViews:
        """The two text views, tokenized together (in a DataLoader worker)."""
        return tokenize_groups(self.encoder, text_views(self.augmentation, items, rng))

    def training_step(self, batch: list[str] | TextViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        n = views.size
        z = encode_views(self.encoder, self.augmentation, self.to_device(views.features), n, self.rng)
        p = apply_head(self.projector, z, n, self.spec.batch_norm)
        loss = self.loss_fn(p[:n], p[n:])
        return {"loss": loss}
