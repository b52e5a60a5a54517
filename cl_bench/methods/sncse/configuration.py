"""The spec of ``method=sncse`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.sncse.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cl_bench.methods.specs import Template
from cl_bench.specs import MethodSpec, RunSetting


@dataclass(kw_only=True)
class SNCSESpec(MethodSpec):
    """SNCSE (:class:`cl_bench.methods.sncse.modeling.SNCSE`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.sncse.modeling.SNCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("soft_negative",)
    summary: ClassVar[str] = ("SNCSE: PromptBERT's [MASK] views + the negated sentence as a soft negative, "
                              "bidirectional margin loss")
    own_prompts: ClassVar[bool] = True  # it sets pooler=mask and the templates as the encoder's prompts
    needs_masked_lm: ClassVar[str] = "its templates are pooled at [MASK] (with a decoder: pooler=prompt_last, PromptEOL, with method=simcse)"

    #: s1 + s2 of train_SNCSE.py (view 1; the evaluation prompt)
    template: Template = 'This sentence : "[X]" means [MASK].'
    second_template: Template = 'This sentence of "[X]" means [MASK].'  # ss1 + s2 (view 2 and the soft negative)

    def check_setting(self, setting: RunSetting) -> None:
        """The augmentation makes the soft negatives, so it must rewrite text."""
        if not setting.rewrites_text:
            raise ValueError(f"augmentation={setting.augmentation_name}: method=sncse makes its soft negatives with a "
                             "text augmentation; use augmentation=negation (SNCSE's)")
