"""The spec of ``method=barlow_twins`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.barlow_twins.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.methods.specs import (
    BatchNormMode,
    check_head,
)
from cl_bench.specs import MethodSpec


@dataclass(kw_only=True)
class BarlowTwinsSpec(MethodSpec):
    """Barlow Twins (:class:`cl_bench.methods.barlow_twins.modeling.BarlowTwins`; conf/method/barlow_twins.yaml explains each
    key)."""

    target: ClassVar[str] = "cl_bench.methods.barlow_twins.modeling.BarlowTwins"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("two_view",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.projector=[16,16]",)
    summary: ClassVar[str] = "Barlow Twins: two views through a projector, cross-correlation driven to the identity"
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    projector: list[int]
    batch_norm: BatchNormMode

    def check(self) -> None:
        check_head(self.values(), "projector")
