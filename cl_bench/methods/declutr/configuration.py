"""The spec of ``method=declutr`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.declutr.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from annotated_types import Ge

from cl_bench.data.documents import DocumentFormat
from cl_bench.methods.specs import MlmProbability, MlmWeight, mlm_inert_keys
from cl_bench.specs import MethodSpec, RunSetting

#: ``method.sampling_strategy`` of DeCLUTR: how a positive span relates to its anchor
SamplingStrategy = StrEnum("SamplingStrategy", "any adjacent subsuming")


@dataclass(kw_only=True)
class DeCLUTRSpec(MethodSpec):
    """DeCLUTR (:class:`cl_bench.methods.declutr.modeling.DeCLUTR`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.declutr.modeling.DeCLUTR"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    tiny_run: ClassVar[tuple[str, ...]] = ("data=enwiki_documents", "method.min_span_len=2", "method.max_span_len=8", "method.mlm_weight=0")
    summary: ClassVar[str] = ("DeCLUTR: anchor and positive spans sampled from documents, contrastive loss + MLM on "
                              "the anchors")

    num_anchors: Annotated[int, Ge(1)] = 2  # anchors per document (their spans are each other's hard negatives)
    num_positives: Annotated[int, Ge(1)] = 2  # positives per anchor, averaged into one embedding
    #: shortest span, in whitespace tokens (DeCLUTR: 32; at most method.max_span_len)
    min_span_len: Annotated[int, Ge(1)] = 32
    #: longest span, in whitespace tokens (DeCLUTR: 512); keep model.max_length above its subword length
    max_span_len: Annotated[int, Ge(1)] = 512
    #: how a positive span relates to its anchor: any (overlap/adjacent/subsumed) | adjacent | subsuming
    sampling_strategy: SamplingStrategy = SamplingStrategy.any
    mlm_weight: MlmWeight = 1.0  # MLM loss on the masked anchors (0 disables MLM)
    mlm_probability: MlmProbability = 0.15  # the fraction of the anchors' tokens masked for the MLM loss
    doc_format: DocumentFormat = DocumentFormat.auto  # auto | wikiextractor | plain (cl_bench/data/documents.py)

    def check_combination(self) -> None:
        """A span's shortest length is at most its longest."""
        low, high = self.min_span_len, self.max_span_len
        if low > high:
            raise ValueError(f"method.min_span_len: must be in [1, max_span_len={high}], got {low}")

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        return mlm_inert_keys(self.values())
