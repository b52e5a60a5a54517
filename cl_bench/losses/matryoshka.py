"""Matryoshka representation learning (Kusupati et al., NeurIPS 2022) around any loss that takes embeddings.

``train.matryoshka_dims=[768, 512, 256, 128, 64]`` (and optionally ``train.matryoshka_weights``) turns the
configured loss ``L`` into ``Σ_k w_k · L(normalize(x[:, :d_k]) for every embedding x)``: the loss is computed
again on the first ``d_k`` coordinates of every embedding it is given (anchors, positives, hard negatives; scored
pairs' sentences; triplets), each prefix L2-normalised, so each prefix of the embedding is trained to be an
embedding of its own. Scores, labels and other inputs pass unchanged. Weights default to 1 each.

The normalisation is sentence-transformers' ``MatryoshkaLoss`` (its ``shrink``: slice, then ``F.normalize``), the
full size included. It changes nothing for a loss that only reads cosines (InfoNCE, CoSENT, ...), and it changes the
value of every loss that reads lengths or distances (``sbert_triplet``, ``triplet``, ``contrastive``, ``npair``,
``mixcse``, ...): the Matryoshka loss of those is the loss of unit-length prefixes, as sentence-transformers
trains it (tests/losses/test_matryoshka.py checks it against ``MatryoshkaLoss`` over ``MultipleNegativesRankingLoss`` and
``TripletLoss``, float64, loss and gradients).

The wrapper is a pure function of its inputs like the loss it wraps; it keeps the wrapped loss's kind and
hyperparameters visible (``func``, ``keywords``), so methods and the distributed gather see the same loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from cl_bench.losses.specs import MatryoshkaKeys


def _truncate(value: Any, width: int, dim: int) -> Any:
    """The first ``dim`` coordinates of an (N, width) floating tensor, L2-normalised (sentence-transformers'
    ``shrink``); anything else unchanged."""
    if torch.is_tensor(value) and value.is_floating_point() and value.ndim == 2 and value.shape[1] == width:
        return F.normalize(value[:, :dim], p=2, dim=-1)
    return value


class MatryoshkaLoss:
    """``Σ_k w_k · loss(embeddings truncated to dims[k] and L2-normalised)``.

    Args:
        loss: the configured loss (a ``functools.partial`` of a loss of an :data:`EMBEDDING_KINDS` kind).
        dims: the prefix sizes d_k.
        weights: w_k (default 1 each).
    """

    def __init__(self, loss: Callable[..., torch.Tensor], dims: Sequence[int], weights: Sequence[float] | None = None):
        MatryoshkaKeys(matryoshka_dims=list(dims), matryoshka_weights=None if weights is None else list(weights)).check()
        self.loss = loss
        self.dims = [int(d) for d in dims]
        self.weights = [float(w) for w in weights] if weights is not None else [1.0] * len(self.dims)
        # what methods and cl_bench.utils.distributed read from a configured loss: its function and hyperparameters
        self.func = getattr(loss, "func", loss)
        self.keywords = dict(getattr(loss, "keywords", {}))

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        width = next(a.shape[1] for a in args if torch.is_tensor(a) and a.ndim == 2)
        too_wide = [d for d in self.dims if d > width]
        if too_wide:
            raise ValueError(f"train.matryoshka_dims: {too_wide} exceed the embedding width {width}")
        total: torch.Tensor | None = None
        for dim, weight in zip(self.dims, self.weights, strict=True):
            term = self.loss(*(_truncate(a, width, dim) for a in args),
                             **{k: _truncate(v, width, dim) for k, v in kwargs.items()})
            total = weight * term if total is None else total + weight * term
        assert total is not None
        return total
