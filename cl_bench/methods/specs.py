"""The methods' specs: each method's config keys with their types, what it uses and calls, and its rules.

Torch-free (see :mod:`cl_bench.specs`): ``cl-bench`` runs these rules on the composed config before torch
loads. Each spec names the ``nn.Module`` it describes (``target``), which the YAML's ``_target_`` builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cl_bench.specs import MethodSpec, RunSetting, check_choice, check_ranges

#: the auxiliary-MLM modes (:mod:`cl_bench.models.mlm`)
MLM_MODES: tuple[str, ...] = ("clean", "masked", "untied")


def check_mlm_config(values: dict[str, Any]) -> None:
    """The auxiliary-MLM keys shared by SimCSE and supervised SimCSE: weight, probability, mode."""
    check_ranges("method", values, {"mlm_weight": (lambda v: v >= 0, ">= 0"),
                                    "mlm_probability": (lambda v: 0 < v < 1, "in (0, 1)")})
    check_choice("method", values, "mlm_mode", MLM_MODES)


def mlm_inert_keys(values: dict[str, Any]) -> dict[str, str]:
    """``mlm_probability`` (and ``mlm_mode``, where a method has it) cannot act when ``mlm_weight`` is 0 (no MLM term)."""
    if float(values.get("mlm_weight", 0.0) or 0.0) != 0.0:
        return {}
    why = "method.mlm_weight is 0 (no MLM term); set method.mlm_weight > 0"
    return {key: why for key in ("mlm_probability", "mlm_mode") if key in values}


@dataclass(kw_only=True)
class SimCSESpec(MethodSpec):
    """Unsupervised SimCSE (:class:`cl_bench.methods.simcse.SimCSE`; its docstring explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.simcse.SimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("unsupervised SimCSE: two views of each sentence (dropout, or any augmentation), "
                              "in-batch negatives, optional MLM")
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    mlm_weight: float
    mlm_probability: float
    mlm_mode: str
    augment_both_views: bool
    fixed_dropout_mask: bool
    select_with_mlp: bool

    def check(self) -> None:
        check_mlm_config(self.values())

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
