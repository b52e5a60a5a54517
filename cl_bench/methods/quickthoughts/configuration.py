"""The spec of ``method=quickthoughts`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.quickthoughts.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from cl_bench.specs import MethodSpec, check_ranges

#: ``method.embedding`` of QuickThoughts: f ⊕ g (the paper), or one of the two encoders
QuickThoughtsEmbedding = StrEnum("QuickThoughtsEmbedding", "concat f g")


@dataclass(kw_only=True)
class QuickThoughtsSpec(MethodSpec):
    """QuickThoughts (:class:`cl_bench.methods.quickthoughts.modeling.QuickThoughts`; conf/method/quickthoughts.yaml explains
    each key)."""

    target: ClassVar[str] = "cl_bench.methods.quickthoughts.modeling.QuickThoughts"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("neighbour",)
    tiny_run: ClassVar[tuple[str, ...]] = ("data=enwiki_sentences",)
    summary: ClassVar[str] = "QuickThoughts: encoders f, g classify each sentence's neighbours among a contiguous batch"

    encoders: int
    context_size: int
    embedding: QuickThoughtsEmbedding

    def check(self) -> None:
        check_ranges("method", self.values(), {"encoders": (lambda v: v in (1, 2), "1 (shared f = g) or 2"),
                                               "context_size": (lambda v: v >= 1, ">= 1")})
