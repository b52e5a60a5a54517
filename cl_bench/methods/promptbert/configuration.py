"""The spec of ``method=promptbert`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.promptbert.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from cl_bench.methods.specs import (
    check_templates,
)
from cl_bench.specs import MethodSpec, RunSetting

#: ``method.head``: SimCSE's fresh Linear+tanh in training only (unsup-bert), or the checkpoint's masked-LM
#: transform trained and kept at evaluation (sup-bert's ``--mask_embedding_sentence_org_mlp``)
PromptBertHead = StrEnum("PromptBertHead", "mlp mlm_transform")
#: ``method.dev_embedding``: the embedding the checkpoint-selecting dev evaluation scores
#: * ``test``: the final test's (the first template, ``method.prompt_period``, ``method.denoise_eval``);
#: * ``trainer``: Prompt-BERT's trainer's (prompt_bert/trainers.py ``evaluate`` → models.py ``sentemb_forward``
#:   with the training arguments still set): the first template's ``[MASK]`` state minus the template's own
#:   (``--mask_embedding_sentence_delta``), no period appended — what the official run selected its checkpoint on.
DevEmbedding = StrEnum("DevEmbedding", "test trainer")
#: ``method.prompt_period`` of PromptBERT: the final period its code adds, or none (:data:`cl_bench.models.prompts.PeriodRule`)
PromptBertPeriod = StrEnum("PromptBertPeriod", "promptbert none")


@dataclass(kw_only=True)
class PromptBERTSpec(MethodSpec):
    """PromptBERT (:class:`cl_bench.methods.promptbert.modeling.PromptBERT`; conf/method/promptbert.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.promptbert.modeling.PromptBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("PromptBERT: two templates as views, the [MASK] state as the embedding, template "
                              "denoising, in-batch negatives")
    own_prompts: ClassVar[bool] = True  # it sets pooler=mask and the templates as the encoder's prompts
    needs_masked_lm: ClassVar[str] = "its templates are pooled at [MASK] (with a decoder: pooler=prompt_last, PromptEOL, with method=simcse)"

    template: str
    second_template: str | None
    denoise: bool
    prompt_period: PromptBertPeriod
    #: true: the contradictions are the premises' hard negatives
    supervised: bool
    head: PromptBertHead
    denoise_eval: bool
    dev_embedding: DevEmbedding

    def check(self) -> None:
        check_templates(self.values(), ("template", "second_template"))

    def check_setting(self, setting: RunSetting) -> None:
        """``head=mlm_transform`` takes BERT's masked-LM head transform: rejected before loading another model type."""
        if self.head == "mlm_transform" and setting.model_type not in (None, "bert"):
            raise ValueError(f"method.head: mlm_transform needs a BERT masked-LM head (cls.predictions.transform); "
                             f"the model is a {setting.model_type}; use method.head=mlp")

    def supplied_inputs(self) -> frozenset[str]:
        return frozenset({"hard_negatives"}) if self.supervised else frozenset()

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        if self.denoise:
            return {}
        why = "method.denoise is false (the head was trained on undenoised states); set method.denoise=true"
        return {"denoise_eval": why, "dev_embedding": why}
