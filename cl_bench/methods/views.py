"""Helpers shared by the two-view methods without negatives or with their own heads (Barlow Twins,
BYOL, SwAV, the memory bank): the text views of a batch, their encoding, and MLP heads.

Not a method: nothing here is selectable with ``method=``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from cl_bench.augment.cutoff import encode_with_embedding_augmentation


def text_views(augmentation: Any, sentences: Sequence[str], rng: random.Random) -> tuple[list[str], list[str]]:
    """Two text views of ``sentences``: each rewritten independently by a text augmentation, or the
    sentences themselves twice (dropout-only views, or an embedding-level augmentation applied later)."""
    if augmentation is None or augmentation.embedding_level:
        return list(sentences), list(sentences)
    return augmentation.augment_text(sentences, rng), augmentation.augment_text(sentences, rng)


def encode_views(
    encoder: Any, augmentation: Any, features: dict[str, torch.Tensor], num_first: int, rng: random.Random
) -> torch.Tensor:
    """Encode a batch of stacked views in one forward pass (independent dropout masks per row).

    With an embedding-level augmentation (cutoff) the rows from ``num_first`` on get it, as
    SimCSE applies it to the second view.
    """
    if augmentation is not None and augmentation.embedding_level:
        generator = torch.Generator(device="cpu").manual_seed(rng.getrandbits(63))
        return encode_with_embedding_augmentation(encoder, features, augmentation, num_first, generator)
    return encoder(features)


def mlp_head(in_dim: int, sizes: Sequence[int], *, last_bias: bool = True, hidden_bias: bool = True) -> nn.Sequential:
    """``Linear–BatchNorm–ReLU`` for every size but the last, then a ``Linear`` to the last size.

    The heads of Barlow Twins (``hidden_bias=False``, ``last_bias=False``), BYOL and SwAV.
    """
    if not sizes or any(int(s) < 1 for s in sizes):
        raise ValueError(f"head sizes must be a non-empty list of integers >= 1, got {list(sizes)}")
    layers: list[nn.Module] = []
    width = in_dim
    for size in sizes[:-1]:
        layers += [nn.Linear(width, int(size), bias=hidden_bias), nn.BatchNorm1d(int(size)), nn.ReLU()]
        width = int(size)
    layers.append(nn.Linear(width, int(sizes[-1]), bias=last_bias))
    return nn.Sequential(*layers)


def check_head(values: dict[str, Any], key: str) -> None:
    """Raise ``ValueError("method.<key>: ...")`` unless ``values[key]`` is a non-empty list of sizes >= 1."""
    sizes = values.get(key)
    if sizes is not None and (
        isinstance(sizes, str | int) or not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes)
    ):
        raise ValueError(f"method.{key}: must be a non-empty list of layer sizes >= 1, got {sizes!r}")


def loss_keyword(loss_fn: Any, key: str, method: str) -> Any:
    """A hyperparameter of the configured loss (a ``functools.partial`` built by Hydra).

    Raises:
        ValueError: when the configured loss has no such keyword.
    """
    keywords = getattr(loss_fn, "keywords", {})
    if key not in keywords:
        raise ValueError(f"method={method} needs loss.{key} from its loss, but the configured loss has none")
    return keywords[key]
