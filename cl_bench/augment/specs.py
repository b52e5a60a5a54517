"""The augmentations' specs: each ``augmentation=`` option's keys with their types, what it does to a view
(rewrites text, edits embeddings, runs a model) and its rules.

Torch-free (see :mod:`cl_bench.specs`). A spec's :meth:`~cl_bench.specs.Spec.check` holds the value rules its
augmentation's constructor applies (the constructor keeps them too), so a bad value is rejected before any
model loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from cl_bench.specs import AugmentationSpec

#: back-translation's sources of views (``augmentation.source``): models, else file | models | file
BACK_TRANSLATION_SOURCES: tuple[str, ...] = ("auto", "models", "file")
#: the negation's sources (``augmentation.source``): SNCSE's rule, or precomputed negations
NEGATION_SOURCES: tuple[str, ...] = ("rules", "file")
#: word repetition's units (``augmentation.dup_type``): subword tokens of the training tokenizer, or words
DUP_TYPES: tuple[str, ...] = ("bpe", "word")


def check_rate(rate: float, key: str = "augmentation.rate", upper: float = 1.0) -> None:
    """One-line error unless ``0 <= rate < upper``."""
    if not 0.0 <= rate < upper:
        raise ValueError(f"{key}: must be in [0, {upper:g}), got {rate}")


def check_word_repetition(dup_rate: Any, dup_type: Any) -> None:
    """Word repetition's keys: ``dup_rate`` in [0, 1], a known ``dup_type``."""
    if not 0.0 <= float(dup_rate) <= 1.0:
        raise ValueError(f"augmentation.dup_rate: must be in [0, 1], got {dup_rate}")
    if dup_type not in DUP_TYPES:
        raise ValueError(f"augmentation.dup_type: unknown '{dup_type}'; valid: {', '.join(DUP_TYPES)}")


def check_negation(source: Any, file: Any) -> None:
    """The negation's keys: a known ``source``; ``file`` an existing file with ``source=file`` and unset otherwise."""
    if source not in NEGATION_SOURCES:
        raise ValueError(f"augmentation.source: unknown '{source}'; valid: {', '.join(NEGATION_SOURCES)}")
    if source == "file" and not (file and Path(file).is_file()):
        raise ValueError(f"augmentation.file: source=file needs a file of [sentence, negation] lines, got {file!r}")
    if source != "file" and file:
        raise ValueError(f"augmentation.file: has no effect with augmentation.source={source}")


def translates_corpus_once(values: Mapping[str, Any]) -> bool:
    """Whether a back-translation configuration translates its corpus once into the cache (beam search,
    a corpus file, ``cache`` on) instead of every batch during training."""
    return bool(values.get("cache", True) and values.get("corpus_file") and not values.get("do_sample", False))


# ------------------------------------------------------------------------------------------------
# no text change
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class DropoutSpec(AugmentationSpec):
    """SimCSE's default: the views differ only by the encoder's dropout masks (:class:`cl_bench.augment.base.Dropout`)."""

    target: ClassVar[str] = "cl_bench.augment.base.Dropout"
    name: ClassVar[str] = "dropout"
    rewrites_text: ClassVar[bool] = False


@dataclass(kw_only=True)
class _CutoffSpec(AugmentationSpec):
    """The three cutoffs' key (:class:`cl_bench.augment.cutoff.Cutoff`): the erased fraction, in [0, 1)."""

    rewrites_text: ClassVar[bool] = False
    embedding_level: ClassVar[bool] = True

    rate: float

    def check(self) -> None:
        check_rate(self.rate)


@dataclass(kw_only=True)
class TokenCutoffSpec(_CutoffSpec):
    """Token cutoff (:class:`cl_bench.augment.cutoff.TokenCutoff`)."""

    target: ClassVar[str] = "cl_bench.augment.cutoff.TokenCutoff"
    name: ClassVar[str] = "token_cutoff"


@dataclass(kw_only=True)
class SpanCutoffSpec(_CutoffSpec):
    """Span cutoff (:class:`cl_bench.augment.cutoff.SpanCutoff`)."""

    target: ClassVar[str] = "cl_bench.augment.cutoff.SpanCutoff"
    name: ClassVar[str] = "span_cutoff"


@dataclass(kw_only=True)
class FeatureCutoffSpec(_CutoffSpec):
    """Feature cutoff (:class:`cl_bench.augment.cutoff.FeatureCutoff`)."""

    target: ClassVar[str] = "cl_bench.augment.cutoff.FeatureCutoff"
    name: ClassVar[str] = "feature_cutoff"


# ------------------------------------------------------------------------------------------------
# word-level (SimCSE Table 1, EDA, nlpaug's synonyms)
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class CropSpec(AugmentationSpec):
    """SimCSE "crop k%" (:class:`cl_bench.augment.words.Crop`)."""

    target: ClassVar[str] = "cl_bench.augment.words.Crop"
    name: ClassVar[str] = "crop"

    rate: float

    def check(self) -> None:
        check_rate(self.rate)


@dataclass(kw_only=True)
class WordDeletionSpec(AugmentationSpec):
    """SimCSE "word deletion k%" (:class:`cl_bench.augment.words.WordDeletion`)."""

    target: ClassVar[str] = "cl_bench.augment.words.WordDeletion"
    name: ClassVar[str] = "word_deletion"

    rate: float

    def check(self) -> None:
        check_rate(self.rate)


@dataclass(kw_only=True)
class DeleteOneWordSpec(AugmentationSpec):
    """SimCSE "delete one word" (:class:`cl_bench.augment.words.DeleteOneWord`); no key."""

    target: ClassVar[str] = "cl_bench.augment.words.DeleteOneWord"
    name: ClassVar[str] = "delete_one_word"


@dataclass(kw_only=True)
class _EDASpec(AugmentationSpec):
    """The four EDA operations' key: α, in [0, 1)."""

    alpha: float

    def check(self) -> None:
        check_rate(self.alpha, "augmentation.alpha")


@dataclass(kw_only=True)
class SynonymReplacementSpec(_EDASpec):
    """EDA synonym replacement (:class:`cl_bench.augment.eda.SynonymReplacement`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.SynonymReplacement"
    name: ClassVar[str] = "eda_synonym"


@dataclass(kw_only=True)
class RandomInsertionSpec(_EDASpec):
    """EDA random insertion (:class:`cl_bench.augment.eda.RandomInsertion`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.RandomInsertion"
    name: ClassVar[str] = "eda_insert"


@dataclass(kw_only=True)
class RandomSwapSpec(_EDASpec):
    """EDA random swap (:class:`cl_bench.augment.eda.RandomSwap`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.RandomSwap"
    name: ClassVar[str] = "eda_swap"


@dataclass(kw_only=True)
class RandomDeletionSpec(_EDASpec):
    """EDA random deletion (:class:`cl_bench.augment.eda.RandomDeletion`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.RandomDeletion"
    name: ClassVar[str] = "eda_delete"


@dataclass(kw_only=True)
class SynonymSubstitutionSpec(AugmentationSpec):
    """nlpaug's SynonymAug rule (:class:`cl_bench.augment.synonym.SynonymSubstitution`)."""

    target: ClassVar[str] = "cl_bench.augment.synonym.SynonymSubstitution"
    name: ClassVar[str] = "synonym"

    aug_p: float
    aug_min: int
    aug_max: int

    def check(self) -> None:
        if not 0.0 <= self.aug_p <= 1.0:
            raise ValueError(f"augmentation.aug_p: must be in [0, 1], got {self.aug_p}")
        if self.aug_min < 0 or self.aug_max < 1 or self.aug_min > self.aug_max:
            raise ValueError(
                "augmentation.aug_min/aug_max: need 0 <= aug_min <= aug_max and aug_max >= 1, "
                f"got {self.aug_min}, {self.aug_max}"
            )


@dataclass(kw_only=True)
class WordRepetitionSpec(AugmentationSpec):
    """ESimCSE's word repetition (:class:`cl_bench.augment.word_repetition.WordRepetition`)."""

    target: ClassVar[str] = "cl_bench.augment.word_repetition.WordRepetition"
    name: ClassVar[str] = "word_repetition"

    dup_rate: float
    dup_type: str

    def check(self) -> None:
        check_word_repetition(self.dup_rate, self.dup_type)


# ------------------------------------------------------------------------------------------------
# sentence-level
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class NegationSpec(AugmentationSpec):
    """The sentence's negation, SNCSE's soft negative (:class:`cl_bench.augment.negation.Negation`)."""

    target: ClassVar[str] = "cl_bench.augment.negation.Negation"
    name: ClassVar[str] = "negation"

    source: str
    file: str | None

    def check(self) -> None:
        check_negation(self.source, self.file)


@dataclass(kw_only=True)
class MLMReplaceSpec(AugmentationSpec):
    """SimCSE "MLM k%": a masked LM replaces words (:class:`cl_bench.augment.mlm_replace.MLMReplace`)."""

    target: ClassVar[str] = "cl_bench.augment.mlm_replace.MLMReplace"
    name: ClassVar[str] = "mlm_replace"

    probability: float
    mlm_model: str | None
    top_k: int
    batch_size: int

    def check(self) -> None:
        if not 0.0 < self.probability <= 1.0:
            raise ValueError(f"augmentation.probability: must be in (0, 1], got {self.probability}")
        if self.top_k < 1:
            raise ValueError(f"augmentation.top_k: must be >= 1, got {self.top_k}")
        if self.batch_size < 1:
            raise ValueError(f"augmentation.batch_size: must be >= 1, got {self.batch_size}")

    def runs_model_in_training(self) -> bool:
        return True  # the masked LM, on the encoder's device


@dataclass(kw_only=True)
class BackTranslationSpec(AugmentationSpec):
    """Back-translated views (:class:`cl_bench.augment.back_translation.BackTranslation`)."""

    target: ClassVar[str] = "cl_bench.augment.back_translation.BackTranslation"
    name: ClassVar[str] = "back_translation"

    pivot_lang: str
    source_lang: str
    forward_model: str | None
    backward_model: str | None
    paraphrase_file: str | None
    corpus_file: str | None
    source: str
    num_beams: int
    do_sample: bool
    max_length: int
    batch_size: int
    cache: bool
    cache_dir: str | None
    limit: int | None

    def check(self) -> None:
        if self.source not in BACK_TRANSLATION_SOURCES:
            raise ValueError(
                f"augmentation.source: must be one of {', '.join(BACK_TRANSLATION_SOURCES)}, got '{self.source}'"
            )

    def runs_model_in_training(self) -> bool:
        """The translators run during training unless the views come from a file or the corpus cache."""
        return self.source != "file" and not translates_corpus_once(self.values())
