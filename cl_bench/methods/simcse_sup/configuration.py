"""The spec of ``method=simcse_sup`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.simcse_sup.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.methods.specs import (
    check_mlm_config,
    mlm_inert_keys,
)
from cl_bench.models.hub import ModelLoadError, check_model_reachable
from cl_bench.models.pooler_names import POOLERS
from cl_bench.specs import MethodSpec, MlmMode, RunSetting


@dataclass(kw_only=True)
class SupervisedSimCSESpec(MethodSpec):
    """Supervised SimCSE, optionally guided (GISTEmbed) (:class:`cl_bench.methods.simcse_sup.modeling.SupervisedSimCSE`;
    conf/method/simcse_sup.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.simcse_sup.modeling.SupervisedSimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair", "guided_pair")
    supplies: ClassVar[frozenset[str]] = frozenset({"hard_negatives"})
    tiny_run: ClassVar[tuple[str, ...]] = ("data=nli_snli_devtest",)
    summary: ClassVar[str] = ("supervised SimCSE: NLI (premise, entailment, contradiction); the contradiction is a "
                              "hard negative")
    encodes_views: ClassVar[bool] = True  # its columns go through tokenize_groups: model.view_prompts acts

    #: false also accepts 2-column (premise, entailment) files
    use_hard_negatives: bool
    #: 0: no MLM term, and no MLM head is loaded
    mlm_weight: float
    #: the fraction of tokens masked for the MLM loss
    mlm_probability: float
    mlm_mode: MlmMode
    guide: str | None
    guide_pooler: str

    def check(self) -> None:
        check_mlm_config(self.values())
        if self.guide:
            try:
                check_model_reachable(str(self.guide))
            except ModelLoadError as err:  # its message names model.name_or_path: name the guide's key
                raise ValueError(str(err).replace("model.name_or_path", "method.guide", 1)) from err
            if self.guide_pooler not in POOLERS:
                raise ValueError(f"method.guide_pooler: unknown pooler '{self.guide_pooler}'; valid: {', '.join(POOLERS)}")

    def supplied_inputs(self) -> frozenset[str]:
        return self.supplies if self.use_hard_negatives else frozenset()

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = mlm_inert_keys(self.values())
        if not self.guide:
            inert["guide_pooler"] = "method.guide is null (no guide encoder)"
        elif setting.loss_kind != "guided_pair" and "ignore" not in setting.loss_inputs:
            inert["guide"] = ("the configured loss takes no guide (loss=gist) and no mask of ignored columns (ignore=, "
                              "loss=infonce)")
        return inert

    def check_setting(self, setting: RunSetting) -> None:
        """A guided loss (``loss=gist``) needs ``method.guide``."""
        if setting.loss_kind == "guided_pair" and not self.guide:
            raise ValueError("loss: GISTEmbed's loss (loss=gist, a guided_pair loss) needs a guide encoder; set "
                             "method.guide=<local folder or hub id> (e.g. sentence-transformers/all-MiniLM-L6-v2) or use "
                             "loss=infonce")
