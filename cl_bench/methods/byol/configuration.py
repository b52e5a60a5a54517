"""The spec of ``method=byol`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.byol.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.methods.specs import (
    BatchNormMode,
    check_head,
)
from cl_bench.specs import MethodSpec, check_ranges


@dataclass(kw_only=True)
class BYOLSpec(MethodSpec):
    """BYOL (:class:`cl_bench.methods.byol.modeling.BYOL`; conf/method/byol.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.byol.modeling.BYOL"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("predict_target",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.projection=[16,8]",)
    summary: ClassVar[str] = ("BYOL: online encoder + projector + predictor against a momentum target of the other view, "
                              "no negatives")
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    projection: list[int]
    momentum: float
    batch_norm: BatchNormMode

    def check(self) -> None:
        values = self.values()
        check_head(values, "projection")
        check_ranges("method", values, {"momentum": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]")})
