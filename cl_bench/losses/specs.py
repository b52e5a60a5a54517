"""The losses' specs: each ``loss=`` option's keys with their types, its kind (the call a method makes to it),
what its keys need to act, the inputs it takes, and its rules.

Torch-free (see :mod:`cl_bench.specs`). The kinds are listed in :mod:`cl_bench.losses`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from cl_bench.specs import LossSpec


def check_tau(tau: float) -> None:
    """A temperature must be a positive number."""
    if not tau > 0:
        raise ValueError(f"loss.tau: must be > 0, got {tau}")


@dataclass(kw_only=True)
class InfoNCESpec(LossSpec):
    """InfoNCE with in-batch negatives (:func:`cl_bench.losses.infonce.info_nce`)."""

    target: ClassVar[str] = "cl_bench.losses.infonce.info_nce"
    kind: ClassVar[str] = "pair"
    needs: ClassVar[Mapping[str, str]] = {"hard_negative_alpha": "hard_negatives"}
    inputs: ClassVar[frozenset[str]] = frozenset({"labels", "ignore"})

    tau: float
    hard_negative_alpha: float

    def check(self) -> None:
        check_tau(self.tau)
