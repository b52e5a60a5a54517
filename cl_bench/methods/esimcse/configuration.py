"""The spec of ``method=esimcse`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.esimcse.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from annotated_types import Ge, Interval

from cl_bench.specs import MethodSpec, RunSetting

#: ``method.momentum_start`` of ESimCSE: where the momentum encoder starts (see :mod:`cl_bench.methods.esimcse`)
MomentumStart = StrEnum("MomentumStart", "pretrained random")


@dataclass(kw_only=True)
class ESimCSESpec(MethodSpec):
    """ESimCSE (:class:`cl_bench.methods.esimcse.modeling.ESimCSE`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.esimcse.modeling.ESimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    tiny_run: ClassVar[tuple[str, ...]] = ("method.neg_size=8",)
    summary: ClassVar[str] = ("ESimCSE: word-repetition positive (augmentation=word_repetition), momentum-encoder queue "
                              "of extra negatives")
    takes_prompts: ClassVar[bool] = False  # word repetition edits token ids (the official bpe rule): no prompt layout

    momentum: Annotated[float, Interval(ge=0, le=1)] = 0.995  # m of the momentum encoder (run.sh momentum=0.995)
    #: queued keys (run.sh: 160 for BERT-base/large and RoBERTa-base, 128 RoBERTa-large); 0: no queue
    neg_size: Annotated[int, Ge(0)] = 160
    #: pretrained: the momentum encoder starts as the backbone's copy (the paper's idea) | random: re-drawn as the
    #: official run's (its log lists momentum_model.* as newly initialised)
    momentum_start: MomentumStart = MomentumStart.pretrained

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        if int(self.neg_size or 0) == 0:
            why = "method.neg_size is 0 (no queue, no momentum encoder); set method.neg_size > 0"
            return {"momentum": why, "momentum_start": why}
        return {}
