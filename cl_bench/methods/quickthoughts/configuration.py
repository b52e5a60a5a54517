"""The spec of ``method=quickthoughts`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.quickthoughts.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from annotated_types import Ge

from cl_bench.specs import MethodSpec, Must

#: ``method.embedding`` of QuickThoughts: f ⊕ g (the paper), or one of the two encoders
QuickThoughtsEmbedding = StrEnum("QuickThoughtsEmbedding", "concat f g")


@dataclass(kw_only=True)
class QuickThoughtsSpec(MethodSpec):
    """QuickThoughts (:class:`cl_bench.methods.quickthoughts.modeling.QuickThoughts`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.quickthoughts.modeling.QuickThoughts"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("neighbour",)
    tiny_run: ClassVar[tuple[str, ...]] = ("data=enwiki_sentences",)
    summary: ClassVar[str] = "QuickThoughts: encoders f, g classify each sentence's neighbours among a contiguous batch"

    #: 2: separate f (input) and g (candidates); 1: shared weights (SimCSE Table 2)
    encoders: Annotated[int, Must(lambda v: v in (1, 2), "be 1 (shared f = g) or 2")] = 2
    #: neighbours on each side that are targets (S2V: 1 = previous and next)
    context_size: Annotated[int, Ge(1)] = 1
    embedding: QuickThoughtsEmbedding = QuickThoughtsEmbedding.concat  # concat (f ⊕ g, the paper) | f | g
