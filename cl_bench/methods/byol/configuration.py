"""The spec of ``method=byol`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.byol.modeling`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar

from annotated_types import Interval

from cl_bench.methods.specs import BatchNormMode, LayerSizes
from cl_bench.specs import MethodSpec


@dataclass(kw_only=True)
class BYOLSpec(MethodSpec):
    """BYOL (:class:`cl_bench.methods.byol.modeling.BYOL`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.byol.modeling.BYOL"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("predict_target",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.projection=[16,8]",)
    summary: ClassVar[str] = ("BYOL: online encoder + projector + predictor against a momentum target of the other view, "
                              "no negatives")
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    #: projector and predictor: Linear(·,4096)-BN-ReLU-Linear(4096,256)
    projection: LayerSizes = field(default_factory=lambda: [4096, 256])
    #: τ_base of the momentum target; constant here (the paper raises it to 1 with a cosine schedule)
    momentum: Annotated[float, Interval(ge=0, le=1)] = 0.996
    #: per_view: BN statistics per view in projector/predictor/target (BYOL, BSL) | joint: stacked
    batch_norm: BatchNormMode = BatchNormMode.per_view
