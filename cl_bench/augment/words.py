"""Word-level discrete augmentations of SimCSE's Table 1: crop, word deletion, delete one word.

Words are whitespace-separated tokens, always kept or deleted whole (SimCSE issue #231), and
the result is re-joined with single spaces. No operation ever returns an empty sentence: a
sentence of one word is returned unchanged.
"""

from __future__ import annotations

import abc
import math
import random
import re
from collections.abc import Sequence

from cl_bench.augment.base import Augmentation
from cl_bench.augment.lexicon import WordNetLexicon, load_lexicon
from cl_bench.augment.specs import CropSpec, DeleteOneWordSpec, WordDeletionSpec

_AFFIXES = re.compile(r"^(\W*)(.*?)(\W*)$", re.DOTALL)


def split_words(sentence: str) -> list[str]:
    """Whitespace tokens of a sentence."""
    return sentence.split()


def split_affixes(word: str) -> tuple[str, str, str]:
    """``"(dogs),"`` -> ``("(", "dogs", "),")``: leading punctuation, the word, trailing punctuation."""
    match = _AFFIXES.match(word)
    assert match is not None  # the pattern matches every string
    return match.group(1), match.group(2), match.group(3)


def with_case_of(original: str, replacement: str) -> str:
    """``replacement`` with an initial capital when ``original`` has one."""
    return replacement[:1].upper() + replacement[1:] if original[:1].isupper() else replacement


def rounded_count(rate: float, length: int) -> int:
    """``rate * length`` rounded half up to a whole number of words."""
    return int(math.floor(rate * length + 0.5))


def crop_words(words: Sequence[str], rate: float, rng: random.Random) -> list[str]:
    """Keep one random contiguous span of ``length - round(rate * length)`` words (at least one)."""
    if len(words) < 2:
        return list(words)
    keep = max(1, len(words) - rounded_count(rate, len(words)))
    start = rng.randint(0, len(words) - keep)
    return list(words[start : start + keep])


def delete_words(words: Sequence[str], rate: float, rng: random.Random) -> list[str]:
    """Delete ``round(rate * length)`` words at random positions (at least one word is kept)."""
    if len(words) < 2:
        return list(words)
    count = min(len(words) - 1, rounded_count(rate, len(words)))
    dropped = set(rng.sample(range(len(words)), count))
    return [word for i, word in enumerate(words) if i not in dropped]


def delete_one_word(words: Sequence[str], rng: random.Random) -> list[str]:
    """Delete one word at a random position (sentences of one word are kept)."""
    if len(words) < 2:
        return list(words)
    drop = rng.randrange(len(words))
    return [word for i, word in enumerate(words) if i != drop]


class WordAugmentation(Augmentation, abc.ABC):
    """Base of the word-level augmentations: applies :meth:`augment_words` to each sentence."""

    @abc.abstractmethod
    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        """Return the augmented word list of one sentence."""

    def augment_text(self, sentences: Sequence[str], rng: random.Random) -> list[str]:
        """Augment each sentence in order with the same ``rng`` (deterministic given its state)."""
        out = []
        for sentence in sentences:
            words = split_words(sentence)
            out.append(" ".join(self.augment_words(words, rng)) if words else sentence)
        return out


class WordNetAugmentation(WordAugmentation, abc.ABC):
    """A word augmentation that needs WordNet (EDA's synonym operations, nlpaug's synonym rule): it is loaded in
    :meth:`setup`, or on first use."""

    _lexicon: WordNetLexicon | None = None

    def setup(self, encoder: object, model_name_or_path: str) -> None:
        """Load WordNet before training starts (fails early with install instructions)."""
        self._lexicon = load_lexicon()

    @property
    def lexicon(self) -> WordNetLexicon:
        if self._lexicon is None:
            self._lexicon = load_lexicon()
        return self._lexicon


class Crop(WordAugmentation):
    """SimCSE "crop k%": keep a random contiguous span of 100-k% of the words.

    Keys: declared on its spec (:class:`~cl_bench.augment.specs.CropSpec`).
    """

    spec: CropSpec

    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        return crop_words(words, self.spec.rate, rng)


class WordDeletion(WordAugmentation):
    """SimCSE "word deletion k%": delete k% of the words at random positions.

    Keys: declared on its spec (:class:`~cl_bench.augment.specs.WordDeletionSpec`).
    """

    spec: WordDeletionSpec

    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        return delete_words(words, self.spec.rate, rng)


class DeleteOneWord(WordAugmentation):
    """SimCSE "delete one word" (Tables 1 and 2): remove one random word."""

    spec: DeleteOneWordSpec

    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        return delete_one_word(words, rng)
