"""The spec of ``method=sg_opt`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.sg_opt.modeling`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import ClassVar

from cl_bench.specs import MethodSpec, RunSetting, check_ranges

#: ``method.layer_pooling`` of SG-OPT: per-layer pooling over tokens
LayerPooling = StrEnum("LayerPooling", "max mean")
#: an STS-B split file (``sts-<split>.csv``), whose splits ``method.stsb_splits`` of SG-OPT picks
STSB_FILE = re.compile(r"^sts-(?P<split>\w+)\.csv$")


@dataclass(kw_only=True)
class SelfGuidedSpec(MethodSpec):
    """SG-BERT / SG-OPT (:class:`cl_bench.methods.sg_opt.modeling.SelfGuided`; conf/method/sg_opt.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.sg_opt.modeling.SelfGuided"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("self_guided",)
    tiny_run: ClassVar[tuple[str, ...]] = ("data=stsb_sentences", "method.projection_size=8", "method.stsb_splits=null")
    summary: ClassVar[str] = ("SG-BERT/SG-OPT: a frozen BERT_F's layer views guide the tuned BERT_T's [CLS] "
                              "(loss=sg_opt, or loss=sg for SG-BERT)")

    reg_weight: float
    layers: list[int] | None
    layer_pooling: LayerPooling
    projection_size: int
    freeze_embeddings: bool
    frozen_dropout: bool
    #: null reads data.train_file only; a file that is not an STS-B sts-<split>.csv is read one sentence per line
    stsb_splits: list[str] | None

    def check(self) -> None:
        check_ranges("method", self.values(), {"reg_weight": (lambda v: v >= 0, ">= 0"),
                                               "projection_size": (lambda v: v >= 0, ">= 0 (0 = no head)")})

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if STSB_FILE.match(Path(setting.train_file).name) is None:
            inert["stsb_splits"] = f"data.train_file is not an STS-B sts-<split>.csv: {setting.train_file}"
        if setting.dropout == 0:
            inert["frozen_dropout"] = "dropout is 0: BERT_F has no dropout to run with"
        return inert
