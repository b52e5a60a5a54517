"""BYOL (Grill et al., NeurIPS 2020) on sentences: no negatives, a momentum target network.

The online network (the sentence encoder, a projector Linear–BN–ReLU–Linear 4096-256 and a
predictor of the same shape) predicts the target network's projection of the other view; the
target (a copy of encoder and projector) gets no gradient and follows
``ξ ← m·ξ + (1 − m)·θ`` after every optimizer step. Views: two dropout masks and/or any text or
cutoff augmentation. The loss is ``loss=byol`` (symmetric normalised MSE).

Difference from the paper: the momentum m is constant (``method.momentum``, the paper's base
0.996) instead of the paper's cosine increase to 1 over training.
"""

from __future__ import annotations

import random

import torch

from cl_bench.methods.base import (
    MethodContext,
    MomentumMethod,
    TextViews,
    apply_head,
    encode_views,
    mlp_head,
    text_views,
    tokenize_groups,
)
from cl_bench.methods.byol.configuration import BYOLSpec


class BYOL(MomentumMethod):
    """Bootstrap Your Own Latent (its loss is ``byol``).

    Keys: declared on its spec (:class:`cl_bench.methods.byol.configuration.BYOLSpec`).
    """

    def __init__(self, context: MethodContext, spec: BYOLSpec) -> None:
        super().__init__(context, spec)
        self.projector = mlp_head(self.encoder.hidden_size, spec.projection)
        self.predictor = mlp_head(int(spec.projection[-1]), spec.projection)
        # the target network: frozen copies that only follow ξ ← m·ξ + (1 − m)·θ after each step
        self.target_encoder = self.momentum_copy(self.encoder)
        self.target_projector = self.momentum_copy(self.projector)

    def prepare(self, items: list[str], rng: random.Random) -> TextViews:
        """The two text views, tokenized together (in a DataLoader worker)."""
        return tokenize_groups(self.encoder, text_views(self.augmentation, items, rng))

    def training_step(self, batch: list[str] | TextViews) -> dict[str, torch.Tensor]:
        views = self.prepared(batch)
        features, n = self.to_device(views.features), views.size
        state = self.rng.getstate()  # the target sees the same cutoff choices as the online network
        online = encode_views(self.encoder, self.augmentation, features, n, self.rng)
        head = lambda module, z: apply_head(module, z, n, self.spec.batch_norm)  # noqa: E731
        predictions = head(self.predictor, head(self.projector, online))
        with torch.no_grad():
            self.rng.setstate(state)
            targets = head(self.target_projector, encode_views(self.target_encoder, self.augmentation, features, n, self.rng))
        loss = self.loss_fn(predictions[:n], predictions[n:], targets[:n], targets[n:])
        return {"loss": loss}
