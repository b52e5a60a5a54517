"""The spec of ``method=swav`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.swav.modeling`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar

from annotated_types import Ge

from cl_bench.methods.specs import LayerSizes
from cl_bench.specs import MethodSpec


@dataclass(kw_only=True)
class SwAVSpec(MethodSpec):
    """SwAV (:class:`cl_bench.methods.swav.modeling.SwAV`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.swav.modeling.SwAV"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("swapped_prediction",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.projection=[16,8]", "method.num_prototypes=5")
    summary: ClassVar[str] = "SwAV: projection head, K prototypes, Sinkhorn-Knopp codes, swapped prediction between two views"
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    projection: LayerSizes = field(default_factory=lambda: [2048, 128])  # official --hidden_mlp 2048 --feat_dim 128
    num_prototypes: Annotated[int, Ge(2)] = 3000  # K normalised prototypes (official --nmb_prototypes, ImageNet)
    #: steps during which the prototypes stay frozen (official --freeze_prototypes_niters)
    freeze_prototypes_steps: Annotated[int, Ge(0)] = 313
