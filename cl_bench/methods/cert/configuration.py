"""The spec of ``method=cert`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.cert.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cl_bench.specs import MethodSpec, RunSetting, check_ranges

#: MoCHi's N in the paper's main runs (Kalantidis et al. 2020)
MOCHI_HARDEST = 1024


def mochi_on(values: dict[str, Any]) -> bool:
    """Whether a CERT configuration mixes hard negatives (s or s′ above 0)."""
    return (values.get("mochi_synthetic") or 0) + (values.get("mochi_query_mixed") or 0) > 0


@dataclass(kw_only=True)
class CERTSpec(MethodSpec):
    """CERT / MoCo with optional MoCHi (:class:`cl_bench.methods.cert.modeling.CERT`; conf/method/cert.yaml explains each
    key)."""

    target: ClassVar[str] = "cl_bench.methods.cert.modeling.CERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("queue",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.queue_size=8", "loss.tau=1")  # τ 0.07 saturates a tiny loss
    summary: ClassVar[str] = ("CERT / MoCo: momentum key encoder, a FIFO queue of negative keys; the key is an augmented "
                              "sentence")

    queue_size: int
    momentum: float
    projection_dim: int
    mlp: bool
    #: true: the query is augmented too (MoCo augments both views; CERT only the key)
    augment_query: bool
    mochi_hardest: int | None
    mochi_synthetic: int
    mochi_query_mixed: int

    def check(self) -> None:
        values = self.values()
        check_ranges("method", values, {
            "queue_size": (lambda v: v >= 1, ">= 1"),
            "momentum": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
            "projection_dim": (lambda v: v >= 1, ">= 1"),
            "mochi_synthetic": (lambda v: v >= 0, ">= 0"),
            "mochi_query_mixed": (lambda v: v >= 0, ">= 0"),
        })
        hardest, queue_size = self.mochi_hardest, self.queue_size
        if hardest is not None and not 1 <= hardest <= queue_size:
            raise ValueError(f"method.mochi_hardest: must be between 1 and method.queue_size ({queue_size}), got {hardest}")
        if mochi_on(values) and hardest is None and MOCHI_HARDEST > queue_size:
            raise ValueError(
                f"method.mochi_hardest: the default N = {MOCHI_HARDEST} exceeds method.queue_size ({queue_size}); set it"
            )

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if not mochi_on(self.values()):
            inert["mochi_hardest"] = "MoCHi is off (method.mochi_synthetic = method.mochi_query_mixed = 0)"
        if not setting.rewrites_text and not setting.embedding_level:  # dropout: nothing to apply to the query
            inert["augment_query"] = (
                f"augmentation={setting.augmentation_name} changes neither the text nor the embeddings "
                "(augment_query acts with a text or cutoff augmentation)"
            )
        return inert
