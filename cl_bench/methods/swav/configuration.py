"""The spec of ``method=swav`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.swav.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.methods.specs import (
    check_head,
)
from cl_bench.specs import MethodSpec, check_ranges


@dataclass(kw_only=True)
class SwAVSpec(MethodSpec):
    """SwAV (:class:`cl_bench.methods.swav.modeling.SwAV`; conf/method/swav.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.swav.modeling.SwAV"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("swapped_prediction",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.projection=[16,8]", "method.num_prototypes=5")
    summary: ClassVar[str] = "SwAV: projection head, K prototypes, Sinkhorn-Knopp codes, swapped prediction between two views"
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    projection: list[int]
    num_prototypes: int
    freeze_prototypes_steps: int

    def check(self) -> None:
        values = self.values()
        check_head(values, "projection")
        check_ranges("method", values, {
            "num_prototypes": (lambda v: v >= 2, ">= 2"),
            "freeze_prototypes_steps": (lambda v: v >= 0, ">= 0"),
        })
