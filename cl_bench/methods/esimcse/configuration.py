"""The spec of ``method=esimcse`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.esimcse.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from cl_bench.specs import MethodSpec, RunSetting, check_ranges

#: ``method.momentum_start`` of ESimCSE: where the momentum encoder starts (see :mod:`cl_bench.methods.esimcse`)
MomentumStart = StrEnum("MomentumStart", "pretrained random")


@dataclass(kw_only=True)
class ESimCSESpec(MethodSpec):
    """ESimCSE (:class:`cl_bench.methods.esimcse.modeling.ESimCSE`; conf/method/esimcse.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.esimcse.modeling.ESimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.neg_size=8",)
    summary: ClassVar[str] = ("ESimCSE: word-repetition positive (augmentation=word_repetition), momentum-encoder queue "
                              "of extra negatives")
    takes_prompts: ClassVar[bool] = False  # word repetition edits token ids (the official bpe rule): no prompt layout

    momentum: float
    neg_size: int
    momentum_start: MomentumStart

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "momentum": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
            "neg_size": (lambda v: v >= 0, ">= 0"),
        })

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        if int(self.neg_size or 0) == 0:
            why = "method.neg_size is 0 (no queue, no momentum encoder); set method.neg_size > 0"
            return {"momentum": why, "momentum_start": why}
        return {}
