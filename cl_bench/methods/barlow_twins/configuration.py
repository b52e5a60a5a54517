"""The spec of ``method=barlow_twins`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.barlow_twins.modeling`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from cl_bench.methods.specs import BatchNormMode, LayerSizes
from cl_bench.specs import MethodSpec


@dataclass(kw_only=True)
class BarlowTwinsSpec(MethodSpec):
    """Barlow Twins (:class:`cl_bench.methods.barlow_twins.modeling.BarlowTwins`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.barlow_twins.modeling.BarlowTwins"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("two_view",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.projector=[16,16]",)
    summary: ClassVar[str] = "Barlow Twins: two views through a projector, cross-correlation driven to the identity"
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    #: the projector's layer sizes, Linear-BN-ReLU blocks, bias-free (official ``--projector``); dropped after training
    projector: LayerSizes = field(default_factory=lambda: [8192, 8192, 8192])
    #: per_view: projector BN statistics per view (official, SCD) | joint: both views stacked
    batch_norm: BatchNormMode = BatchNormMode.per_view
