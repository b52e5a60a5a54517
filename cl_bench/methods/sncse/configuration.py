"""The spec of ``method=sncse`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.sncse.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.methods.specs import (
    check_templates,
)
from cl_bench.specs import MethodSpec, RunSetting


@dataclass(kw_only=True)
class SNCSESpec(MethodSpec):
    """SNCSE (:class:`cl_bench.methods.sncse.modeling.SNCSE`; conf/method/sncse.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.sncse.modeling.SNCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("soft_negative",)
    summary: ClassVar[str] = ("SNCSE: PromptBERT's [MASK] views + the negated sentence as a soft negative, "
                              "bidirectional margin loss")
    own_prompts: ClassVar[bool] = True  # it sets pooler=mask and the templates as the encoder's prompts
    needs_masked_lm: ClassVar[str] = "its templates are pooled at [MASK] (with a decoder: pooler=prompt_last, PromptEOL, with method=simcse)"

    template: str
    second_template: str

    def check(self) -> None:
        check_templates(self.values(), ("template", "second_template"))

    def check_setting(self, setting: RunSetting) -> None:
        """The augmentation makes the soft negatives, so it must rewrite text."""
        if not setting.rewrites_text:
            raise ValueError(f"augmentation={setting.augmentation_name}: method=sncse makes its soft negatives with a "
                             "text augmentation; use augmentation=negation (SNCSE's)")
