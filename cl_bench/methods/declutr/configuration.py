"""The spec of ``method=declutr`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.declutr.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from cl_bench.data.documents import DocumentFormat
from cl_bench.methods.specs import (
    check_mlm_config,
    mlm_inert_keys,
)
from cl_bench.specs import MethodSpec, RunSetting, check_ranges

#: ``method.sampling_strategy`` of DeCLUTR: how a positive span relates to its anchor
SamplingStrategy = StrEnum("SamplingStrategy", "any adjacent subsuming")


@dataclass(kw_only=True)
class DeCLUTRSpec(MethodSpec):
    """DeCLUTR (:class:`cl_bench.methods.declutr.modeling.DeCLUTR`; conf/method/declutr.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.declutr.modeling.DeCLUTR"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    tiny_run: ClassVar[tuple[str, ...]] = ("data=enwiki_documents", "method.min_span_len=2", "method.max_span_len=8", "method.mlm_weight=0")
    summary: ClassVar[str] = ("DeCLUTR: anchor and positive spans sampled from documents, contrastive loss + MLM on "
                              "the anchors")

    num_anchors: int
    num_positives: int
    #: DeCLUTR: 32 and 512
    min_span_len: int
    max_span_len: int
    sampling_strategy: SamplingStrategy
    mlm_weight: float
    mlm_probability: float
    doc_format: DocumentFormat

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "num_anchors": (lambda v: v >= 1, ">= 1"),
            "num_positives": (lambda v: v >= 1, ">= 1"),
            "max_span_len": (lambda v: v >= 1, ">= 1"),
        })
        check_mlm_config(self.values())
        low, high = self.min_span_len, self.max_span_len
        if not 1 <= low <= high:
            raise ValueError(f"method.min_span_len: must be in [1, max_span_len={high}], got {low}")

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        return mlm_inert_keys(self.values())
