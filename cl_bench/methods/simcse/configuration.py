"""The spec of ``method=simcse`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.simcse.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.methods.specs import MlmProbability, MlmWeight, mlm_inert_keys
from cl_bench.specs import MethodSpec, MlmMode, RunSetting


@dataclass(kw_only=True)
class SimCSESpec(MethodSpec):
    """Unsupervised SimCSE (:class:`cl_bench.methods.simcse.modeling.SimCSE`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.simcse.modeling.SimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("unsupervised SimCSE: two views of each sentence (dropout, or any augmentation), "
                              "in-batch negatives, optional MLM")
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    #: λ of the auxiliary MLM loss (paper: 0.1 in the "w/ MLM" rows); 0: no MLM term, and no MLM head is loaded
    mlm_weight: MlmWeight = 0.0
    mlm_probability: MlmProbability = 0.15  # the fraction of tokens masked for the MLM loss
    #: clean: contrastive views unmasked, LM head tied | masked: SimCSE code before PR #121 (views = the MLM-masked
    #: inputs, LM head untied); masked needs mlm_weight > 0 | untied: SimCSE's latest code (clean views, LM head
    #: untied, copied from the checkpoint)
    mlm_mode: MlmMode = MlmMode.clean
    #: true: a text augmentation rewrites both views independently; false: the second view only
    augment_both_views: bool = True
    fixed_dropout_mask: bool = False  # true: both views share one dropout mask (SimCSE Table 3 "fixed 0.1")
    #: true: the dev evaluation that selects the checkpoint applies pooler=cls's MLP, which pooler.mlp_only_train
    #: drops at the final test (MixCSE's official script trained and selected without ``--mlp_only_train`` and
    #: tested with ``--pooler cls_before_pooler``: experiment=mixcse_bert)
    select_with_mlp: bool = False

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = mlm_inert_keys(self.values())
        if not setting.rewrites_text:  # make_views returns the sentence twice
            inert["augment_both_views"] = (
                f"augmentation={setting.augmentation_name} rewrites no text (only a text augmentation "
                "is applied to one or both views)"
            )
        if setting.embedding_level:  # the cutoff path encodes both views in one pass
            inert["fixed_dropout_mask"] = (
                f"augmentation={setting.augmentation_name} is embedding-level: its views cannot share a dropout mask"
            )
        elif setting.dropout == 0:
            inert["fixed_dropout_mask"] = "dropout is 0: there is no dropout mask to share"
        if setting.pooler != "cls" or setting.mlp_only_train is False:
            inert["select_with_mlp"] = ("only pooler=cls with pooler.mlp_only_train=true drops an MLP at evaluation "
                                        f"(pooler={setting.pooler}, mlp_only_train={setting.mlp_only_train})")
        return inert
