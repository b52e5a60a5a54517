"""The methods' specs: each method's config keys with their types, what it uses and calls, and its rules.

Torch-free (see :mod:`cl_bench.specs`): ``cl-bench`` runs these rules on the composed config before torch
loads. Each spec names the ``nn.Module`` it describes (``target``), which the YAML's ``_target_`` builds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from cl_bench.data.documents import DocumentFormat
from cl_bench.data.nli import senteval_snli_split
from cl_bench.models.hub import ModelLoadError, check_model_reachable
from cl_bench.models.prompts import MASK_PLACEHOLDER, SENTENCE_SLOT, check_prompt
from cl_bench.specs import MethodSpec, MlmMode, RunSetting, check_ranges

#: ``method.batch_norm`` of the two-view methods with BatchNorm heads (Barlow Twins, BYOL)
BatchNormMode = StrEnum("BatchNormMode", "per_view joint")
#: MoCHi's N in the paper's main runs (Kalantidis et al. 2020)
MOCHI_HARDEST = 1024
#: ``method.sampling_strategy`` of DeCLUTR: how a positive span relates to its anchor
SamplingStrategy = StrEnum("SamplingStrategy", "any adjacent subsuming")
#: ``method.projector`` of DiffCSE
Projector = StrEnum("Projector", "batchnorm mlp")
#: ``method.momentum_start`` of ESimCSE: where the momentum encoder starts (see :mod:`cl_bench.methods.esimcse`)
MomentumStart = StrEnum("MomentumStart", "pretrained random")
#: ``method.activation`` of IS-BERT's CNN
Activation = StrEnum("Activation", "relu none")
#: ``method.discriminator`` of IS-BERT
Discriminator = StrEnum("Discriminator", "dot mlp_dot")
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
#: ``method.embedding`` of QuickThoughts: f ⊕ g (the paper), or one of the two encoders
QuickThoughtsEmbedding = StrEnum("QuickThoughtsEmbedding", "concat f g")
#: where a scored_pair loss's pairs come from (``method.scored_pairs`` of SBERT)
ScoredPairs = StrEnum("ScoredPairs", "stsb nli")
#: ``method.layer_pooling`` of SG-OPT: per-layer pooling over tokens
LayerPooling = StrEnum("LayerPooling", "max mean")
#: an STS-B split file (``sts-<split>.csv``), whose splits ``method.stsb_splits`` of SG-OPT picks
STSB_FILE = re.compile(r"^sts-(?P<split>\w+)\.csv$")
#: the loss SBERT's regression is (its ``_target_``): it fits the cosine to a score in [0, 1]
SBERT_REGRESSION_TARGET = "cl_bench.losses.sbert.sbert_regression"


def check_mlm_config(values: dict[str, Any]) -> None:
    """The auxiliary-MLM keys shared by SimCSE, supervised SimCSE and DeCLUTR: weight and probability."""
    check_ranges("method", values, {"mlm_weight": (lambda v: v >= 0, ">= 0"),
                                    "mlm_probability": (lambda v: 0 < v < 1, "in (0, 1)")})


def mlm_inert_keys(values: dict[str, Any]) -> dict[str, str]:
    """``mlm_probability`` (and ``mlm_mode``, where a method has it) cannot act when ``mlm_weight`` is 0 (no MLM term)."""
    if float(values.get("mlm_weight", 0.0) or 0.0) != 0.0:
        return {}
    why = "method.mlm_weight is 0 (no MLM term); set method.mlm_weight > 0"
    return {key: why for key in ("mlm_probability", "mlm_mode") if key in values}


def check_head(values: dict[str, Any], key: str) -> None:
    """Raise ``ValueError("method.<key>: ...")`` unless ``values[key]`` is a non-empty list of sizes >= 1."""
    sizes = values.get(key)
    if sizes is not None and (
        isinstance(sizes, str | int) or not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes)
    ):
        raise ValueError(f"method.{key}: must be a non-empty list of layer sizes >= 1, got {sizes!r}")


def check_templates(values: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Each ``method.<key>`` template has one ``[X]`` and one ``[MASK]``."""
    for key in keys:
        template = values.get(key)
        if template is None:
            continue
        if not isinstance(template, str) or SENTENCE_SLOT not in template or MASK_PLACEHOLDER not in template:
            raise ValueError(f"method.{key}: a template needs the sentence slot {SENTENCE_SLOT} and {MASK_PLACEHOLDER}, "
                             f"got {template!r}")
        check_prompt(template, f"method.{key}", "mask")


def mochi_on(values: dict[str, Any]) -> bool:
    """Whether a CERT configuration mixes hard negatives (s or s′ above 0)."""
    return (values.get("mochi_synthetic") or 0) + (values.get("mochi_query_mixed") or 0) > 0


def check_generator_reachable(name_or_path: str) -> None:
    """Fail before any model loads when ``method.generator`` can obviously not be loaded (the same offline-safe
    check as ``model.name_or_path``: a local folder needs its config.json, a hub id a cached copy or the hub)."""
    try:
        check_model_reachable(name_or_path)
    except ModelLoadError as err:
        raise ValueError(
            f"method.generator: cannot load '{name_or_path}' ({str(err).split(': ', 1)[-1].split(';')[0]}); "
            "point method.generator at a local masked-LM folder, or null for model.name_or_path (a variant, not the "
            "paper's DiffCSE; on a checkpoint without a masked-LM head, e.g. all-MiniLM-L6-v2, the generator's head is "
            "random and this is not DiffCSE's objective: docs/compare.md, DiffCSE's generator offline)"
        ) from err


@dataclass(kw_only=True)
class SimCSESpec(MethodSpec):
    """Unsupervised SimCSE (:class:`cl_bench.methods.simcse.SimCSE`; conf/method/simcse.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.simcse.SimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("unsupervised SimCSE: two views of each sentence (dropout, or any augmentation), "
                              "in-batch negatives, optional MLM")
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    #: 0: no MLM term, and no MLM head is loaded
    mlm_weight: float
    #: the fraction of tokens masked for the MLM loss
    mlm_probability: float
    mlm_mode: MlmMode
    #: false: the text augmentation rewrites the second view only
    augment_both_views: bool
    fixed_dropout_mask: bool
    #: MixCSE's official script trained and selected without ``--mlp_only_train`` and tested with
    #: ``--pooler cls_before_pooler``
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


@dataclass(kw_only=True)
class BarlowTwinsSpec(MethodSpec):
    """Barlow Twins (:class:`cl_bench.methods.barlow_twins.BarlowTwins`; conf/method/barlow_twins.yaml explains each
    key)."""

    target: ClassVar[str] = "cl_bench.methods.barlow_twins.BarlowTwins"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("two_view",)
    summary: ClassVar[str] = "Barlow Twins: two views through a projector, cross-correlation driven to the identity"
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    projector: list[int]
    batch_norm: BatchNormMode

    def check(self) -> None:
        check_head(self.values(), "projector")


@dataclass(kw_only=True)
class BYOLSpec(MethodSpec):
    """BYOL (:class:`cl_bench.methods.byol.BYOL`; conf/method/byol.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.byol.BYOL"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("predict_target",)
    summary: ClassVar[str] = ("BYOL: online encoder + projector + predictor against a momentum target of the other view, "
                              "no negatives")
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    projection: list[int]
    momentum: float
    batch_norm: BatchNormMode

    def check(self) -> None:
        values = self.values()
        check_head(values, "projection")
        check_ranges("method", values, {"momentum": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]")})


@dataclass(kw_only=True)
class CERTSpec(MethodSpec):
    """CERT / MoCo with optional MoCHi (:class:`cl_bench.methods.cert.CERT`; conf/method/cert.yaml explains each
    key)."""

    target: ClassVar[str] = "cl_bench.methods.cert.CERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("queue",)
    summary: ClassVar[str] = ("CERT / MoCo: momentum key encoder, a FIFO queue of negative keys; the key is an augmented "
                              "sentence")

    queue_size: int
    momentum: float
    projection_dim: int
    mlp: bool
    #: true: the query is augmented too (MoCo augments both views; CERT only the key)
    augment_query: bool
    mochi_hardest: int | None
    mochi_synthetic: int
    mochi_query_mixed: int

    def check(self) -> None:
        values = self.values()
        check_ranges("method", values, {
            "queue_size": (lambda v: v >= 1, ">= 1"),
            "momentum": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
            "projection_dim": (lambda v: v >= 1, ">= 1"),
            "mochi_synthetic": (lambda v: v >= 0, ">= 0"),
            "mochi_query_mixed": (lambda v: v >= 0, ">= 0"),
        })
        hardest, queue_size = self.mochi_hardest, self.queue_size
        if hardest is not None and not 1 <= hardest <= queue_size:
            raise ValueError(f"method.mochi_hardest: must be between 1 and method.queue_size ({queue_size}), got {hardest}")
        if mochi_on(values) and hardest is None and MOCHI_HARDEST > queue_size:
            raise ValueError(
                f"method.mochi_hardest: the default N = {MOCHI_HARDEST} exceeds method.queue_size ({queue_size}); set it"
            )

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if not mochi_on(self.values()):
            inert["mochi_hardest"] = "MoCHi is off (method.mochi_synthetic = method.mochi_query_mixed = 0)"
        if not setting.rewrites_text and not setting.embedding_level:  # dropout: nothing to apply to the query
            inert["augment_query"] = (
                f"augmentation={setting.augmentation_name} changes neither the text nor the embeddings "
                "(augment_query acts with a text or cutoff augmentation)"
            )
        return inert


@dataclass(kw_only=True)
class DeCLUTRSpec(MethodSpec):
    """DeCLUTR (:class:`cl_bench.methods.declutr.DeCLUTR`; conf/method/declutr.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.declutr.DeCLUTR"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("DeCLUTR: anchor and positive spans sampled from documents, contrastive loss + MLM on "
                              "the anchors")

    num_anchors: int
    num_positives: int
    #: DeCLUTR: 32 and 512
    min_span_len: int
    max_span_len: int
    sampling_strategy: SamplingStrategy
    mlm_weight: float
    mlm_probability: float
    doc_format: DocumentFormat

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "num_anchors": (lambda v: v >= 1, ">= 1"),
            "num_positives": (lambda v: v >= 1, ">= 1"),
            "max_span_len": (lambda v: v >= 1, ">= 1"),
        })
        check_mlm_config(self.values())
        low, high = self.min_span_len, self.max_span_len
        if not 1 <= low <= high:
            raise ValueError(f"method.min_span_len: must be in [1, max_span_len={high}], got {low}")

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        return mlm_inert_keys(self.values())


@dataclass(kw_only=True)
class DiffCSESpec(MethodSpec):
    """DiffCSE (:class:`cl_bench.methods.diffcse.DiffCSE`; conf/method/diffcse.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.diffcse.DiffCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("DiffCSE: SimCSE + conditional ELECTRA (frozen MLM generator edits, discriminator "
                              "conditioned on the embedding)")

    generator: str | None
    lambda_weight: float
    mask_ratio: float
    projector: Projector

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "lambda_weight": (lambda v: v >= 0, ">= 0"),
            "mask_ratio": (lambda v: 0 < v < 1, "in (0, 1)"),
        })
        if float(self.lambda_weight or 0) > 0 and self.generator:
            check_generator_reachable(str(self.generator))

    def check_setting(self, setting: RunSetting) -> None:
        """The BatchNorm projector is training-only (the saved encoder cannot hold it): with ``pooler=cls`` it
        needs ``pooler.mlp_only_train=true`` (checked here, before the model and the generator load)."""
        if setting.pooler == "cls" and self.projector == "batchnorm" and setting.mlp_only_train is False:
            raise ValueError("pooler.mlp_only_train: method=diffcse's BatchNorm projector is used in training only "
                             "(official --mlp_only_train); set pooler.mlp_only_train=true or method.projector=mlp")

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if setting.pooler and setting.pooler != "cls":  # embed() skips the projector on other poolers
            inert["projector"] = f"only pooler=cls has DiffCSE's projector (pooler={setting.pooler})"
        if float(self.lambda_weight or 0) == 0:
            why = "method.lambda_weight is 0 (no ELECTRA term); set method.lambda_weight > 0"
            inert.update({"generator": why, "mask_ratio": why})
        return inert


@dataclass(kw_only=True)
class ESimCSESpec(MethodSpec):
    """ESimCSE (:class:`cl_bench.methods.esimcse.ESimCSE`; conf/method/esimcse.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.esimcse.ESimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("ESimCSE: word-repetition positive (augmentation=word_repetition), momentum-encoder queue "
                              "of extra negatives")
    takes_prompts: ClassVar[bool] = False  # word repetition edits token ids (the official bpe rule): no prompt layout

    momentum: float
    neg_size: int
    momentum_start: MomentumStart

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "momentum": (lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
            "neg_size": (lambda v: v >= 0, ">= 0"),
        })

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        if int(self.neg_size or 0) == 0:
            why = "method.neg_size is 0 (no queue, no momentum encoder); set method.neg_size > 0"
            return {"momentum": why, "momentum_start": why}
        return {}


@dataclass(kw_only=True)
class ISBERTSpec(MethodSpec):
    """IS-BERT (:class:`cl_bench.methods.is_bert.ISBERT`; conf/method/is_bert.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.is_bert.ISBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("local_global",)
    summary: ClassVar[str] = ("IS-BERT: a CNN over token states; JSD mutual information between local n-gram and "
                              "global features")

    kernel_sizes: list[int] | None
    channels: int
    activation: Activation
    discriminator: Discriminator
    discriminator_size: int
    snli_splits: list[str] | None

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "channels": (lambda v: v >= 1, ">= 1"),
            "discriminator_size": (lambda v: v >= 1, ">= 1"),
            "kernel_sizes": (lambda v: len(v) > 0 and all(k >= 1 and k % 2 == 1 for k in v),
                             "odd positive window sizes ('same' padding)"),
        })

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if self.discriminator != "mlp_dot":
            inert["discriminator_size"] = "only method.discriminator=mlp_dot has a size"
        if senteval_snli_split(setting.train_file) is None:
            inert["snli_splits"] = (
                f"data.train_file is not a SentEval SNLI file (s1.<split>): {setting.train_file}"
            )
        return inert


@dataclass(kw_only=True)
class MemoryBankSpec(MethodSpec):
    """Instance discrimination with a memory bank (:class:`cl_bench.methods.memory_bank.MemoryBank`;
    conf/method/memory_bank.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.memory_bank.MemoryBank"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("memory_bank",)
    summary: ClassVar[str] = "instance discrimination: one bank row per sentence, NCE over sampled rows, bank momentum"

    feature_dim: int
    num_noise: int
    bank_momentum: float

    def check(self) -> None:
        check_ranges("method", self.values(), {
            "feature_dim": (lambda v: v >= 1, ">= 1"),
            "num_noise": (lambda v: v >= 1, ">= 1"),
            "bank_momentum": (lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
        })


@dataclass(kw_only=True)
class PromptBERTSpec(MethodSpec):
    """PromptBERT (:class:`cl_bench.methods.promptbert.PromptBERT`; conf/method/promptbert.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.promptbert.PromptBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = ("PromptBERT: two templates as views, the [MASK] state as the embedding, template "
                              "denoising, in-batch negatives")
    own_prompts: ClassVar[bool] = True  # it sets pooler=mask and the templates as the encoder's prompts

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


@dataclass(kw_only=True)
class QuickThoughtsSpec(MethodSpec):
    """QuickThoughts (:class:`cl_bench.methods.quickthoughts.QuickThoughts`; conf/method/quickthoughts.yaml explains
    each key)."""

    target: ClassVar[str] = "cl_bench.methods.quickthoughts.QuickThoughts"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("neighbour",)
    summary: ClassVar[str] = "QuickThoughts: encoders f, g classify each sentence's neighbours among a contiguous batch"

    encoders: int
    context_size: int
    embedding: QuickThoughtsEmbedding

    def check(self) -> None:
        check_ranges("method", self.values(), {"encoders": (lambda v: v in (1, 2), "1 (shared f = g) or 2"),
                                               "context_size": (lambda v: v >= 1, ">= 1")})


@dataclass(kw_only=True)
class SBERTSpec(MethodSpec):
    """Sentence-BERT (:class:`cl_bench.methods.sbert.SBERT`; conf/method/sbert.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.sbert.SBERT"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("classifier", "scored_pair", "triplet")
    summary: ClassVar[str] = ("Sentence-BERT: siamese fine-tuning; loss=sbert_softmax (NLI), sbert_regression/cosent/angle "
                              "(STS-B) or sbert_triplet/angle_nli (NLI triples)")
    encodes_views: ClassVar[bool] = True  # its columns go through tokenize_groups: model.view_prompts acts

    nli_splits: list[str] | None
    train_classifier: bool
    scored_pairs: ScoredPairs
    score_max: float
    loss_block: int

    def check(self) -> None:
        """``method.score_max`` a number > 0, ``method.loss_block`` an integer >= 0."""
        score_max = self.score_max
        if isinstance(score_max, bool) or not isinstance(score_max, int | float) or not score_max > 0:
            raise ValueError(f"method.score_max: must be a number > 0, got {score_max!r}")
        loss_block = self.loss_block
        if isinstance(loss_block, bool) or not isinstance(loss_block, int) or loss_block < 0:
            raise ValueError(f"method.loss_block: must be an integer >= 0 (0: one loss over the batch), got {loss_block!r}")

    def inert_keys(self, setting: RunSetting) -> dict[str, str]:
        inert = {}
        if setting.loss_kind != "scored_pair":
            inert["scored_pairs"] = f"only a scored_pair loss reads scored pairs (this loss is {setting.loss_kind})"
            inert["score_max"] = f"only a scored_pair loss reads STS-B scores (this loss is {setting.loss_kind})"
        elif self.scored_pairs != "stsb":
            inert["score_max"] = "method.scored_pairs=nli: the pairs' labels are 1 and 0 (no STS-B score to rescale)"
        if setting.loss_kind == "classifier":
            inert["loss_block"] = "a classifier loss (sbert_softmax) is one loss over the batch's labelled pairs"
            return inert
        return {**inert,
                "nli_splits": f"only a classifier loss (sbert_softmax) reads SNLI splits (this loss is {setting.loss_kind})",
                "train_classifier": f"only a classifier loss (sbert_softmax) has a classifier (this loss is {setting.loss_kind})"}

    def check_setting(self, setting: RunSetting) -> None:
        """SBERT's regression fits the cosine to a score in [0, 1]: ``method.score_max`` must stay 1 for it."""
        is_regression = setting.loss is not None and setting.loss.target == SBERT_REGRESSION_TARGET
        if is_regression and float(self.score_max) != 1.0:
            raise ValueError("method.score_max: loss=sbert_regression regresses the cosine on the score in [0, 1]; "
                             "keep method.score_max=1")


@dataclass(kw_only=True)
class SelfGuidedSpec(MethodSpec):
    """SG-BERT / SG-OPT (:class:`cl_bench.methods.sg_opt.SelfGuided`; conf/method/sg_opt.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.sg_opt.SelfGuided"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("self_guided",)
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


@dataclass(kw_only=True)
class SupervisedSimCSESpec(MethodSpec):
    """Supervised SimCSE, optionally guided (GISTEmbed) (:class:`cl_bench.methods.simcse_sup.SupervisedSimCSE`;
    conf/method/simcse_sup.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.simcse_sup.SupervisedSimCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair", "guided_pair")
    supplies: ClassVar[frozenset[str]] = frozenset({"hard_negatives"})
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
            from cl_bench.models.pooler_names import POOLERS  # torch-free; imported only when a guide is set

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


@dataclass(kw_only=True)
class SNCSESpec(MethodSpec):
    """SNCSE (:class:`cl_bench.methods.sncse.SNCSE`; conf/method/sncse.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.sncse.SNCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("soft_negative",)
    summary: ClassVar[str] = ("SNCSE: PromptBERT's [MASK] views + the negated sentence as a soft negative, "
                              "bidirectional margin loss")
    own_prompts: ClassVar[bool] = True  # it sets pooler=mask and the templates as the encoder's prompts

    template: str
    second_template: str

    def check(self) -> None:
        check_templates(self.values(), ("template", "second_template"))

    def check_setting(self, setting: RunSetting) -> None:
        """The augmentation makes the soft negatives, so it must rewrite text."""
        if not setting.rewrites_text:
            raise ValueError(f"augmentation={setting.augmentation_name}: method=sncse makes its soft negatives with a "
                             "text augmentation; use augmentation=negation (SNCSE's)")


@dataclass(kw_only=True)
class SwAVSpec(MethodSpec):
    """SwAV (:class:`cl_bench.methods.swav.SwAV`; conf/method/swav.yaml explains each key)."""

    target: ClassVar[str] = "cl_bench.methods.swav.SwAV"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "augmentation", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("swapped_prediction",)
    summary: ClassVar[str] = "SwAV: projection head, K prototypes, Sinkhorn-Knopp codes, swapped prediction between two views"
    encodes_views: ClassVar[bool] = True  # its views go through tokenize_groups: model.view_prompts acts

    projection: list[int]
    num_prototypes: int
    freeze_prototypes_steps: int

    def check(self) -> None:
        values = self.values()
        check_head(values, "projection")
        check_ranges("method", values, {
            "num_prototypes": (lambda v: v >= 2, ">= 2"),
            "freeze_prototypes_steps": (lambda v: v >= 0, ">= 0"),
        })
