"""The spec of ``method=memory_bank`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.memory_bank.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.specs import MethodSpec, check_ranges


@dataclass(kw_only=True)
class MemoryBankSpec(MethodSpec):
    """Instance discrimination with a memory bank (:class:`cl_bench.methods.memory_bank.modeling.MemoryBank`;
    conf/method/memory_bank.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.memory_bank.modeling.MemoryBank"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("memory_bank",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.feature_dim=8", "method.num_noise=4")
    summary: ClassVar[str] = "instance discrimination: one bank row per sentence, NCE over sampled rows, bank momentum"

    feature_dim: int
    num_noise: int
    bank_momentum: float

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "feature_dim": (lambda v: v >= 1, ">= 1"),
            "num_noise": (lambda v: v >= 1, ">= 1"),
            "bank_momentum": (lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
        })
