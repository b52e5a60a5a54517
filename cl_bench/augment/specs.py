"""The augmentations' specs: each ``augmentation=`` option's keys with their types, what it does to a view
(rewrites text, edits embeddings, runs a model) and its rules.

Torch-free (see :mod:`cl_bench.specs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.specs import AugmentationSpec


def check_rate(rate: float, key: str = "augmentation.rate", upper: float = 1.0) -> None:
    """One-line error unless ``0 <= rate < upper``."""
    if not 0.0 <= rate < upper:
        raise ValueError(f"{key}: must be in [0, {upper:g}), got {rate}")


@dataclass(kw_only=True)
class RandomDeletionSpec(AugmentationSpec):
    """EDA random deletion (:class:`cl_bench.augment.eda.RandomDeletion`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.RandomDeletion"
    name: ClassVar[str] = "eda_delete"

    alpha: float

    def check(self) -> None:
        check_rate(self.alpha, "augmentation.alpha")
