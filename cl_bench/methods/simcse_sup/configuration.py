"""The spec of ``method=simcse_sup`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.simcse_sup.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.methods.specs import MlmProbability, MlmWeight, mlm_inert_keys
from cl_bench.models.hub import ModelLoadError, check_model_reachable
from cl_bench.models.pooler_names import POOLERS
from cl_bench.specs import MethodSpec, MlmMode, RunSetting


@dataclass(kw_only=True)
class SupervisedSimCSESpec(MethodSpec):
    """Supervised SimCSE, optionally guided (GISTEmbed) (:class:`cl_bench.methods.simcse_sup.modeling.SupervisedSimCSE`;
    each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.simcse_sup.modeling.SupervisedSimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair", "guided_pair")
    supplies: ClassVar[frozenset[str]] = frozenset({"hard_negatives"})
    tiny_run: ClassVar[tuple[str, ...]] = ("data=nli_snli_devtest",)
    summary: ClassVar[str] = ("supervised SimCSE: NLI (premise, entailment, contradiction); the contradiction is a "
                              "hard negative")
    encodes_views: ClassVar[bool] = True  # its columns go through tokenize_groups: model.view_prompts acts

    #: false: (premise, entailment) pairs only = Table 7 "w/o hard neg." (STS-B dev 84.9); it also accepts
    #: 2-column (premise, entailment) files
    use_hard_negatives: bool = True
    #: λ of the auxiliary MLM loss on all sentences (paper's sup models: off); 0: no MLM term, and no MLM head is loaded
    mlm_weight: MlmWeight = 0.0
    mlm_probability: MlmProbability = 0.15  # the fraction of tokens masked for the MLM loss
    #: clean: contrastive views unmasked, LM head tied | masked: SimCSE code before PR #121 (views = the MLM-masked
    #: inputs, LM head untied); masked needs mlm_weight > 0 | untied: SimCSE's latest code (clean views, LM head
    #: untied, copied from the checkpoint)
    mlm_mode: MlmMode = MlmMode.clean
    #: a frozen guide encoder (local folder or hub id) filtering in-batch negatives; null: off. loss=gist: GISTEmbed
    #: (sentence-transformers' GISTEmbedLoss); loss=infonce: guided supervised SimCSE (candidates the guide scores >=
    #: the positive leave the denominator)
    guide: str | None = None
    guide_pooler: str = "avg"  # the guide's pooling (sentence-transformers models: avg)

    def check_combination(self) -> None:
        """A guide is reachable, and its pooler known (``guide_pooler`` acts only with a guide)."""
        if self.guide:
            try:
                check_model_reachable(str(self.guide))
            except ModelLoadError as err:  # the check names model.name_or_path: say its parts for the guide's key
                raise ValueError(f"method.guide: {err.reason}" + (f"; {err.fix}" if err.fix else "")) from err
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
