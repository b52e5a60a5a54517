"""The spec of ``method=memory_bank`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.memory_bank.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from annotated_types import Ge, Interval

from cl_bench.specs import MethodSpec


@dataclass(kw_only=True)
class MemoryBankSpec(MethodSpec):
    """Instance discrimination with a memory bank (:class:`cl_bench.methods.memory_bank.modeling.MemoryBank`;
    each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.memory_bank.modeling.MemoryBank"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("memory_bank",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.feature_dim=8", "method.num_noise=4")
    summary: ClassVar[str] = "instance discrimination: one bank row per sentence, NCE over sampled rows, bank momentum"

    feature_dim: Annotated[int, Ge(1)] = 128  # width of the normalised features (paper's --low-dim)
    num_noise: Annotated[int, Ge(1)] = 4096  # M, the bank rows sampled as noise (paper's --nce-k)
    bank_momentum: Annotated[float, Interval(ge=0, lt=1)] = 0.5  # a bank row's momentum (official --nce-m)
