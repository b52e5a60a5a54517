"""The augmentations' specs: each ``augmentation=`` option's keys with their types, what it does to a view
(rewrites text, edits embeddings, runs a model) and its rules.

Torch-free (see :mod:`cl_bench.specs`). An augmentation receives its spec (:func:`cl_bench.specs.build`); a spec's
:meth:`~cl_bench.specs.Spec.check` holds the value rules, run on the config before any model loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import ClassVar

from cl_bench.specs import AugmentationSpec

#: back-translation's sources of views (``augmentation.source``): models, else file | models | file
BackTranslationSource = StrEnum("BackTranslationSource", "auto models file")
#: the negation's sources (``augmentation.source``): SNCSE's rule, or precomputed negations
NegationSource = StrEnum("NegationSource", "rules file")
#: word repetition's units (``augmentation.dup_type``): subword tokens of the training tokenizer, or words
DupType = StrEnum("DupType", "bpe word")


def check_rate(rate: float, key: str = "augmentation.rate", upper: float = 1.0) -> None:
    """One-line error unless ``0 <= rate < upper``."""
    if not 0.0 <= rate < upper:
        raise ValueError(f"{key}: must be in [0, {upper:g}), got {rate}")


@dataclass(kw_only=True)
class RateSpec(AugmentationSpec):
    """An augmentation whose one key is the fraction it changes, ``rate``, in [0, 1) (the cutoffs, crop, word deletion)."""

    #: the fraction changed: of the words (crop, word deletion), of the sentence's tokens (token/span cutoff) or of
    #: the hidden features (feature cutoff)
    rate: float

    def check(self) -> None:
        check_rate(self.rate)


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
class CutoffSpec(RateSpec):
    """The three cutoffs' key (:class:`cl_bench.augment.cutoff.Cutoff`): the erased fraction, in [0, 1)."""

    rewrites_text: ClassVar[bool] = False
    embedding_level: ClassVar[bool] = True


@dataclass(kw_only=True)
class TokenCutoffSpec(CutoffSpec):
    """Token cutoff (:class:`cl_bench.augment.cutoff.TokenCutoff`)."""

    target: ClassVar[str] = "cl_bench.augment.cutoff.TokenCutoff"
    name: ClassVar[str] = "token_cutoff"


@dataclass(kw_only=True)
class SpanCutoffSpec(CutoffSpec):
    """Span cutoff (:class:`cl_bench.augment.cutoff.SpanCutoff`)."""

    target: ClassVar[str] = "cl_bench.augment.cutoff.SpanCutoff"
    name: ClassVar[str] = "span_cutoff"


@dataclass(kw_only=True)
class FeatureCutoffSpec(CutoffSpec):
    """Feature cutoff (:class:`cl_bench.augment.cutoff.FeatureCutoff`)."""

    target: ClassVar[str] = "cl_bench.augment.cutoff.FeatureCutoff"
    name: ClassVar[str] = "feature_cutoff"


# ------------------------------------------------------------------------------------------------
# word-level (SimCSE Table 1, EDA, nlpaug's synonyms)
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class CropSpec(RateSpec):
    """SimCSE "crop k%" (:class:`cl_bench.augment.words.Crop`)."""

    target: ClassVar[str] = "cl_bench.augment.words.Crop"
    name: ClassVar[str] = "crop"


@dataclass(kw_only=True)
class WordDeletionSpec(RateSpec):
    """SimCSE "word deletion k%" (:class:`cl_bench.augment.words.WordDeletion`)."""

    target: ClassVar[str] = "cl_bench.augment.words.WordDeletion"
    name: ClassVar[str] = "word_deletion"


@dataclass(kw_only=True)
class DeleteOneWordSpec(AugmentationSpec):
    """SimCSE "delete one word" (:class:`cl_bench.augment.words.DeleteOneWord`); no key."""

    target: ClassVar[str] = "cl_bench.augment.words.DeleteOneWord"
    name: ClassVar[str] = "delete_one_word"


@dataclass(kw_only=True)
class EDASpec(AugmentationSpec):
    """The four EDA operations' key: α, in [0, 1)."""

    #: EDA's α: ``max(1, floor(α l))`` words of l changed (deletion: each word dropped with probability α)
    alpha: float

    def check(self) -> None:
        check_rate(self.alpha, "augmentation.alpha")


@dataclass(kw_only=True)
class SynonymReplacementSpec(EDASpec):
    """EDA synonym replacement (:class:`cl_bench.augment.eda.SynonymReplacement`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.SynonymReplacement"
    name: ClassVar[str] = "eda_synonym"


@dataclass(kw_only=True)
class RandomInsertionSpec(EDASpec):
    """EDA random insertion (:class:`cl_bench.augment.eda.RandomInsertion`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.RandomInsertion"
    name: ClassVar[str] = "eda_insert"


@dataclass(kw_only=True)
class RandomSwapSpec(EDASpec):
    """EDA random swap (:class:`cl_bench.augment.eda.RandomSwap`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.RandomSwap"
    name: ClassVar[str] = "eda_swap"


@dataclass(kw_only=True)
class RandomDeletionSpec(EDASpec):
    """EDA random deletion (:class:`cl_bench.augment.eda.RandomDeletion`)."""

    target: ClassVar[str] = "cl_bench.augment.eda.RandomDeletion"
    name: ClassVar[str] = "eda_delete"


@dataclass(kw_only=True)
class SynonymSubstitutionSpec(AugmentationSpec):
    """nlpaug's SynonymAug rule (:class:`cl_bench.augment.synonym.SynonymSubstitution`)."""

    target: ClassVar[str] = "cl_bench.augment.synonym.SynonymSubstitution"
    name: ClassVar[str] = "synonym"

    aug_p: float  #: the share of the words replaced
    aug_min: int  #: at least this many
    #: at most this many; 1 replaces exactly one word, SimCSE Table 1's "randomly replace one word with its synonym"
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
    dup_type: DupType

    def check(self) -> None:
        if not 0.0 <= float(self.dup_rate) <= 1.0:
            raise ValueError(f"augmentation.dup_rate: must be in [0, 1], got {self.dup_rate}")


# ------------------------------------------------------------------------------------------------
# sentence-level
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class NegationSpec(AugmentationSpec):
    """The sentence's negation, SNCSE's soft negative (:class:`cl_bench.augment.negation.Negation`)."""

    target: ClassVar[str] = "cl_bench.augment.negation.Negation"
    name: ClassVar[str] = "negation"

    source: NegationSource
    file: str | None

    def check(self) -> None:
        """``file`` an existing file with ``source=file`` and unset otherwise."""
        if self.source == "file" and not (self.file and Path(self.file).is_file()):
            raise ValueError(
                f"augmentation.file: source=file needs a file of [sentence, negation] lines, got {self.file!r}"
            )
        if self.source != "file" and self.file:
            raise ValueError(f"augmentation.file: has no effect with augmentation.source={self.source}")


@dataclass(kw_only=True)
class MLMReplaceSpec(AugmentationSpec):
    """SimCSE "MLM k%": a masked LM replaces words (:class:`cl_bench.augment.mlm_replace.MLMReplace`)."""

    target: ClassVar[str] = "cl_bench.augment.mlm_replace.MLMReplace"
    name: ClassVar[str] = "mlm_replace"

    probability: float  #: the fraction of the words replaced (SimCSE: 0.15)
    mlm_model: str | None
    top_k: int
    batch_size: int  #: sentences per masked-LM forward pass

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

    pivot_lang: str  #: the pivot language's code (OPUS-MT naming, e.g. ``de``, ``fr``)
    source_lang: str  #: the corpus's language
    forward_model: str | None  #: source -> pivot model id or path
    backward_model: str | None  #: pivot -> source model id or path
    paraphrase_file: str | None  #: precomputed paraphrases, one per line of ``corpus_file``
    corpus_file: str | None  #: the corpus the paraphrase file is aligned with (and the cache translates)
    source: BackTranslationSource
    num_beams: int  #: beam size of the translations
    do_sample: bool
    max_length: int  #: longest translation, in tokens
    batch_size: int  #: sentences per generation call
    cache: bool
    cache_dir: str | None
    limit: int | None

    def translates_corpus_once(self) -> bool:
        """Whether the corpus is translated once into the cache (beam search, a corpus file, ``cache`` on) instead
        of every batch during training."""
        return bool(self.cache and self.corpus_file and not self.do_sample)

    def runs_model_in_training(self) -> bool:
        """The translators run during training unless the views come from a file or the corpus cache."""
        return self.source != "file" and not self.translates_corpus_once()
