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

import copy
from collections.abc import Sequence

import torch
from torch import nn

from cl_bench.methods.base import Method, MethodContext
from cl_bench.methods.views import encode_views, mlp_head, text_views


class BYOL(Method):
    """Bootstrap Your Own Latent.

    Args:
        context: shared build context (its loss is ``byol``).
        projection: the projector's (and predictor's) layer sizes (paper: 4096-256).
        momentum: m of the target update (paper's base value: 0.996).
    """

    name = "byol"
    uses = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds = ("predict_target",)

    def __init__(self, context: MethodContext, projection: Sequence[int] = (4096, 256), momentum: float = 0.996) -> None:
        super().__init__(context)
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"method.momentum: must be in [0, 1], got {momentum}")
        try:
            self.projector = mlp_head(self.encoder.hidden_size, list(projection))
            self.predictor = mlp_head(int(projection[-1]), list(projection))
        except ValueError as err:
            raise ValueError(f"method.projection: {err}") from err
        self.momentum = float(momentum)
        self.target_encoder = copy.deepcopy(self.encoder)
        self.target_projector = copy.deepcopy(self.projector)
        for param in self._target_parameters():
            param.requires_grad_(False)

    def _online_parameters(self) -> list[nn.Parameter]:
        return [*self.encoder.parameters(), *self.projector.parameters()]

    def _target_parameters(self) -> list[nn.Parameter]:
        return [*self.target_encoder.parameters(), *self.target_projector.parameters()]

    @torch.no_grad()
    def momentum_update(self) -> None:
        """ξ ← m·ξ + (1 − m)·θ for every target parameter (BatchNorm statistics are copied)."""
        for target, online in zip(self._target_parameters(), self._online_parameters(), strict=True):
            target.mul_(self.momentum).add_(online.detach(), alpha=1.0 - self.momentum)
        for target, online in zip(self.target_projector.buffers(), self.projector.buffers(), strict=True):
            target.copy_(online)

    def training_step(self, batch: list[str]) -> dict[str, torch.Tensor]:
        first, second = text_views(self.augmentation, batch, self.rng)
        features = self.tokenize(first + second)
        n = len(first)
        state = self.rng.getstate()  # the target sees the same cutoff choices as the online network
        predictions = self.predictor(self.projector(encode_views(self.encoder, self.augmentation, features, n, self.rng)))
        with torch.no_grad():
            self.rng.setstate(state)
            targets = self.target_projector(encode_views(self.target_encoder, self.augmentation, features, n, self.rng))
        loss = self.loss_fn(predictions[:n], predictions[n:], targets[:n], targets[n:])
        return {"loss": loss}

    def on_after_step(self) -> None:
        self.momentum_update()
