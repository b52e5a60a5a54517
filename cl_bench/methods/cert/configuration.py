"""The spec of ``method=cert`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.cert.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from annotated_types import Ge, Interval

from cl_bench.specs import MethodSpec, RunSetting

#: MoCHi's N in the paper's main runs (Kalantidis et al. 2020)
MOCHI_HARDEST = 1024


def mochi_on(values: dict[str, Any]) -> bool:
    """Whether a CERT configuration mixes hard negatives (s or s′ above 0)."""
    return (values.get("mochi_synthetic") or 0) + (values.get("mochi_query_mixed") or 0) > 0


@dataclass(kw_only=True)
class CERTSpec(MethodSpec):
    """CERT / MoCo with optional MoCHi (:class:`cl_bench.methods.cert.modeling.CERT`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.cert.modeling.CERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("queue",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.queue_size=8", "loss.tau=1")  # τ 0.07 saturates a tiny loss
    summary: ClassVar[str] = ("CERT / MoCo: momentum key encoder, a FIFO queue of negative keys; the key is an augmented "
                              "sentence")

    queue_size: Annotated[int, Ge(1)] = 6720  # K negative keys (CERT --moco-k)
    momentum: Annotated[float, Interval(ge=0, le=1)] = 0.999  # m in θ_k ← m·θ_k + (1−m)·θ_q (--moco-m)
    projection_dim: Annotated[int, Ge(1)] = 128  # output of the projection head (--moco-dim)
    mlp: bool = True  # MoCo-v2 MLP head Linear-ReLU-Linear (--mlp); false: one Linear
    #: true: the query is augmented too (MoCo augments both views); false: CERT's query = the original sentence,
    #: key = its augmentation
    augment_query: bool = False
    #: MoCHi (Kalantidis et al., 2020) N: hardest queued keys mixed, at most method.queue_size (null: the paper's 1024)
    mochi_hardest: Annotated[int, Ge(1)] | None = None
    mochi_synthetic: Annotated[int, Ge(0)] = 0  # MoCHi s: negatives mixed from two hard keys (0 and s'=0: MoCHi off)
    mochi_query_mixed: Annotated[int, Ge(0)] = 0  # MoCHi s': negatives mixed from the query and a hard key

    def check_combination(self) -> None:
        """``mochi_hardest`` (set, or its default N with MoCHi on) within the queue."""
        hardest, queue_size = self.mochi_hardest, self.queue_size
        if hardest is not None and hardest > queue_size:
            raise ValueError(f"method.mochi_hardest: must be between 1 and method.queue_size ({queue_size}), got {hardest}")
        if mochi_on(self.values()) and hardest is None and MOCHI_HARDEST > queue_size:
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
