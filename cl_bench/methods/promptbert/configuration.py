"""The spec of ``method=promptbert`` (its keys, types and rules): torch-free, so every check answers before
torch loads; the ``nn.Module`` it describes is in :mod:`cl_bench.methods.promptbert.modeling`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from cl_bench.methods.specs import Template
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
    """PromptBERT (:class:`cl_bench.methods.promptbert.modeling.PromptBERT`; each key's doc is its comment)."""

    target: ClassVar[str] = "cl_bench.methods.promptbert.modeling.PromptBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("PromptBERT: two templates as views, the [MASK] state as the embedding, template "
                              "denoising, in-batch negatives")
    own_prompts: ClassVar[bool] = True  # it sets pooler=mask and the templates as the encoder's prompts
    needs_masked_lm: ClassVar[str] = "its templates are pooled at [MASK] (with a decoder: pooler=prompt_last, PromptEOL, with method=simcse)"

    #: the first view's template (--mask_embedding_sentence_template; also the evaluation prompt)
    template: Template = 'This sentence of "[X]" means [MASK].'
    #: the second view's template (--mask_embedding_sentence_different_template); null: template for every view
    second_template: Template | None = 'This sentence : "[X]" means [MASK].'
    #: --mask_embedding_sentence_delta: subtract the template's own [MASK] state in training
    denoise: bool = True
    #: evaluation.py appends "." unless the sentence ends in . ? " ' (none: never)
    prompt_period: PromptBertPeriod = PromptBertPeriod.promptbert
    #: true: NLI rows (sent0, sent1, hard_neg) as run.sh sup-bert, the contradictions the premises' hard negatives
    #: (experiment=promptbert_sup_bert)
    supervised: bool = False
    #: mlp: fresh Linear+tanh, training only (--mlp_only_train) | mlm_transform: the checkpoint's BertForMaskedLM
    #: cls.predictions.transform, kept at evaluation (--mask_embedding_sentence_org_mlp)
    head: PromptBertHead = PromptBertHead.mlp
    #: subtract the template's own [MASK] state at evaluation too (sup-bert's eargs --mask_embedding_sentence_delta)
    denoise_eval: bool = False
    #: the checkpoint-selecting dev embedding: test (the final test's) | trainer (the official trainer's: denoised,
    #: no "." appended; experiment=promptbert_bert)
    dev_embedding: DevEmbedding = DevEmbedding.test

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
