"""The spec of ``method=sg_opt`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.sg_opt.modeling`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, ClassVar

from annotated_types import Ge, MinLen

from cl_bench.specs import Because, MethodSpec, RunSetting

#: ``method.layer_pooling`` of SG-OPT: per-layer pooling over tokens
LayerPooling = StrEnum("LayerPooling", "max mean")
#: an STS-B split file (``sts-<split>.csv``), whose splits ``method.stsb_splits`` of SG-OPT picks
STSB_FILE = re.compile(r"^sts-(?P<split>\w+)\.csv$")


@dataclass(kw_only=True)
class SelfGuidedSpec(MethodSpec):
    """SG-BERT / SG-OPT (:class:`cl_bench.methods.sg_opt.modeling.SelfGuided`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.sg_opt.modeling.SelfGuided"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("self_guided",)
    tiny_run: ClassVar[tuple[str, ...]] = ("data=stsb_sentences", "method.projection_size=8", "method.stsb_splits=null")
    summary: ClassVar[str] = ("SG-BERT/SG-OPT: a frozen BERT_F's layer views guide the tuned BERT_T's [CLS] "
                              "(loss=sg_opt, or loss=sg for SG-BERT)")

    reg_weight: Annotated[float, Ge(0)] = 0.1  # λ of the regularizer λ·Σ‖θ_T−θ_F‖² (paper; code --lamb 0.1)
    #: BERT_F hidden states used as views; null = all, 0 (embeddings)..num_layers (code lmin 0, lmax -1; the upper
    #: bound is the model's, checked when it loads)
    layers: Annotated[list[Annotated[int, Ge(0)]], MinLen(1)] | None = None
    #: per-layer pooling over tokens: max = paper (authors' summary); mean = official code (--pooling2)
    layer_pooling: LayerPooling = LayerPooling.max
    #: width of head f: Linear(H,4096)-GELU-Linear(4096,4096)-GELU (paper, code); 0 = no head
    projection_size: Annotated[int, Ge(0), Because("0 = no head")] = 4096
    freeze_embeddings: bool = True  # BERT_T's embedding layer frozen (paper; code --freeze)
    #: true: BERT_F runs with dropout in training, as the official code (fit() puts it in train mode)
    frozen_dropout: bool = False
    #: STS-B splits read when data.train_file is an sts-<split>.csv (paper: all); null reads data.train_file only;
    #: a file that is not an STS-B sts-<split>.csv is read one sentence per line
    stsb_splits: list[str] | None = field(default_factory=lambda: ["train", "dev", "test"])

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if STSB_FILE.match(Path(setting.train_file).name) is None:
            inert["stsb_splits"] = f"data.train_file is not an STS-B sts-<split>.csv: {setting.train_file}"
        if setting.dropout == 0:
            inert["frozen_dropout"] = "dropout is 0: BERT_F has no dropout to run with"
        return inert
