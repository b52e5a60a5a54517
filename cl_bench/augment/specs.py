"""The augmentations' specs: each ``augmentation=`` option's keys with their types, what it does to a view
(rewrites text, edits embeddings, runs a model) and its rules.

Torch-free (see :mod:`cl_bench.specs`). An augmentation receives its spec (:func:`cl_bench.specs.build`); each key's
type, default, rule and doc (its comment) are declared here once, and :meth:`~cl_bench.specs.Spec.check` runs the
rules on the config before any model loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ClassVar

from annotated_types import Ge, Interval

from cl_bench.specs import AugmentationSpec

#: back-translation's sources of views (``augmentation.source``): models, else file | models | file
BackTranslationSource = StrEnum("BackTranslationSource", "auto models file")
#: the negation's sources (``augmentation.source``): SNCSE's rule, or precomputed negations
NegationSource = StrEnum("NegationSource", "rules file")
#: word repetition's units (``augmentation.dup_type``): subword tokens of the training tokenizer, or words
DupType = StrEnum("DupType", "bpe word")
#: a fraction of a sentence changed, in [0, 1) (a cutoff's or crop's rate, EDA's α)
Fraction = Annotated[float, Interval(ge=0, lt=1)]


@dataclass(kw_only=True)
class RateSpec(AugmentationSpec):
    """An augmentation whose one key is the fraction it changes, ``rate``, in [0, 1) (the cutoffs, crop, word deletion)."""

    #: the fraction changed: of the words (crop, word deletion: SimCSE Table 1's k, 0.1 / 0.2 / 0.3), of the
    #: sentence's tokens (token/span cutoff; 0.1 is the cutoff authors' run_glue.sh ratio) or of the hidden features
    #: (feature cutoff)
    rate: Fraction = 0.1


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

    #: EDA's α: ``max(1, floor(α l))`` words of l changed (deletion: each word dropped with probability α); for
    #: synonym replacement 0 = exactly one word (SimCSE Table 1 is augmentation=simcse_table1/synonym)
    alpha: Fraction = 0.1


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

    aug_p: Annotated[float, Interval(ge=0, le=1)] = 0.3  # the share of the words replaced (nlpaug default)
    aug_min: Annotated[int, Ge(0)] = 1  # at least this many (nlpaug default; at most aug_max)
    #: at most this many (nlpaug default 10); 1 replaces exactly one word, SimCSE Table 1's "randomly replace one
    #: word with its synonym"
    aug_max: Annotated[int, Ge(1)] = 10

    def check_combination(self) -> None:
        """At least ``aug_min`` words, at most ``aug_max``: the bounds in order."""
        if self.aug_min > self.aug_max:
            raise ValueError(f"augmentation.aug_min: must be <= augmentation.aug_max ({self.aug_max}), got {self.aug_min}")


@dataclass(kw_only=True)
class WordRepetitionSpec(AugmentationSpec):
    """ESimCSE's word repetition (:class:`cl_bench.augment.word_repetition.WordRepetition`)."""

    target: ClassVar[str] = "cl_bench.augment.word_repetition.WordRepetition"
    name: ClassVar[str] = "word_repetition"

    #: r, the share of the words/tokens repeated (ESimCSE run.sh: 0.32 for BERT-base/large, 0.3 RoBERTa-base, 0.28
    #: RoBERTa-large)
    dup_rate: Annotated[float, Interval(ge=0, le=1)] = 0.32
    #: bpe: repeat token ids of the training tokenizer (run.sh) | word: repeat whitespace words
    dup_type: DupType = DupType.bpe


# ------------------------------------------------------------------------------------------------
# sentence-level
# ------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class NegationSpec(AugmentationSpec):
    """The sentence's negation, SNCSE's soft negative (:class:`cl_bench.augment.negation.Negation`)."""

    target: ClassVar[str] = "cl_bench.augment.negation.Negation"
    name: ClassVar[str] = "negation"

    #: rules: SNCSE's rule without its spaCy parser (cl_bench/augment/negation.py says what differs) | file:
    #: precomputed negations
    source: NegationSource = NegationSource.rules
    #: with source=file: one JSON [sentence, negation] list a line (SNCSE's soft_negative_samples.txt)
    file: str | None = None

    def check_combination(self) -> None:
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

    probability: Annotated[float, Interval(gt=0, le=1)] = 0.15  # the fraction of the words replaced (SimCSE: 0.15)
    #: the masked LM, e.g. bert-base-uncased (SimCSE used BERT-base); null: the encoder's own checkpoint and its
    #: pretrained MLM head (frozen copy; a checkpoint without an MLM head is an error)
    mlm_model: str | None = None
    top_k: Annotated[int, Ge(1)] = 100  # sampled among this many predictions (nlpaug ContextualWordEmbsAug default); 1 = most likely other word
    batch_size: Annotated[int, Ge(1)] = 64  # sentences per masked-LM forward pass

    def runs_model_in_training(self) -> bool:
        return True  # the masked LM, on the encoder's device


@dataclass(kw_only=True)
class BackTranslationSpec(AugmentationSpec):
    """Back-translated views (:class:`cl_bench.augment.back_translation.BackTranslation`)."""

    target: ClassVar[str] = "cl_bench.augment.back_translation.BackTranslation"
    name: ClassVar[str] = "back_translation"

    pivot_lang: str = "de"  # the pivot language's code (OPUS-MT naming, e.g. ``de``, ``fr``)
    source_lang: str = "en"  # the corpus's language
    forward_model: str | None = None  # source -> pivot model id or path (null: Helsinki-NLP/opus-mt-<source>-<pivot>)
    backward_model: str | None = None  # pivot -> source model id or path (null: Helsinki-NLP/opus-mt-<pivot>-<source>)
    paraphrase_file: str | None = None  # precomputed paraphrases, one per line of ``corpus_file``
    #: the corpus the paraphrase file is aligned with (and the cache translates); the YAML sets ${data.train_file}
    corpus_file: str | None = None
    source: BackTranslationSource = BackTranslationSource.auto  # auto (models, else file) | models | file
    num_beams: Annotated[int, Ge(1)] = 4  # beam size of the translations
    do_sample: bool = False  # true: seeded sampling, so the two views of a sentence differ
    max_length: Annotated[int, Ge(1)] = 128  # longest translation, in tokens
    batch_size: Annotated[int, Ge(1)] = 32  # sentences per generation call
    cache: bool = True  # beam search: back-translate the corpus once into cache_dir and reuse it in later runs
    cache_dir: str | None = None  # null: $XDG_CACHE_HOME/cl_bench/back_translation (~/.cache/...)
    #: translate only the first ``limit`` sentences, those training reads (the YAML sets ${data.limit}); null: all
    limit: int | None = None

    def generation(self) -> dict[str, Any]:
        """The generation settings, as :class:`~cl_bench.augment.back_translation.BackTranslator` and the cache key take
        them."""
        return {key: getattr(self, key) for key in ("num_beams", "do_sample", "max_length", "batch_size")}

    def translates_corpus_once(self) -> bool:
        """Whether the corpus is translated once into the cache (beam search, a corpus file, ``cache`` on) instead
        of every batch during training."""
        return bool(self.cache and self.corpus_file and not self.do_sample)

    def runs_model_in_training(self) -> bool:
        """The translators run during training unless the views come from a file or the corpus cache."""
        return self.source != "file" and not self.translates_corpus_once()
