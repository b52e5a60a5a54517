"""EDA (Wei & Zou, EMNLP 2019): synonym replacement, random insertion, random swap, random deletion.

Each operation is its own ``augmentation=`` option with EDA's α rule: for a sentence of l words,
synonym replacement, insertion and swap change ``n = max(1, floor(α l))`` words, and random
deletion drops each word with probability ``p = α``. Synonyms come from WordNet
(:mod:`cl_bench.augment.lexicon`). Differences from EDA's script: the sentence is not lowercased
or stripped of punctuation (synonyms replace the word between its punctuation and keep an
initial capital), and stop words are scikit-learn's English list rather than EDA's copy of
NLTK's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from cl_bench.augment.lexicon import WordNetLexicon
from cl_bench.augment.specs import (
    RandomDeletionSpec,
    RandomInsertionSpec,
    RandomSwapSpec,
    SynonymReplacementSpec,
)
from cl_bench.augment.words import WordAugmentation, WordNetAugmentation, split_affixes, with_case_of

# EDA retries: up to 10 random words to find one with synonyms (insertion), 3 draws for a distinct swap partner.
_INSERT_TRIES = 10
_SWAP_TRIES = 3


def eda_count(alpha: float, length: int) -> int:
    """EDA's number of words changed: ``max(1, int(alpha * length))``."""
    return max(1, int(alpha * length))


def synonym_replacement(
    words: Sequence[str], n: int, rng: random.Random, lexicon: WordNetLexicon, stop_words: frozenset[str]
) -> list[str]:
    """Replace up to ``n`` distinct non-stop words by a random synonym (all their occurrences).

    Returns one element per input word; a replaced element may hold a multi-word synonym.
    """
    out = list(words)
    cores = [split_affixes(word)[1] for word in words]
    candidates = sorted({core.lower() for core in cores if core and core.lower() not in stop_words})
    rng.shuffle(candidates)
    replaced = 0
    for candidate in candidates:
        synonyms = lexicon.synonyms(candidate)
        if not synonyms:
            continue
        synonym = rng.choice(synonyms)
        for i, word in enumerate(words):
            prefix, core, suffix = split_affixes(word)
            if core.lower() == candidate:
                out[i] = prefix + with_case_of(core, synonym) + suffix
        replaced += 1
        if replaced >= n:
            break
    return out


def random_insertion(words: Sequence[str], n: int, rng: random.Random, lexicon: WordNetLexicon) -> list[str]:
    """``n`` times: insert a synonym of a random word of the sentence at a random position."""
    out = list(words)
    for _ in range(n):
        for _ in range(_INSERT_TRIES):
            core = split_affixes(out[rng.randrange(len(out))])[1] if out else ""
            synonyms = lexicon.synonyms(core) if core else ()
            if synonyms:
                out.insert(rng.randint(0, len(out)), rng.choice(synonyms))
                break
    return out


def random_swap(words: Sequence[str], n: int, rng: random.Random) -> list[str]:
    """``n`` times: swap the words at two random positions (the multiset of words is kept)."""
    out = list(words)
    if len(out) < 2:
        return out
    for _ in range(n):
        first = rng.randrange(len(out))
        second = first
        for _ in range(_SWAP_TRIES):
            second = rng.randrange(len(out))
            if second != first:
                break
        out[first], out[second] = out[second], out[first]
    return out


def random_deletion(words: Sequence[str], p: float, rng: random.Random) -> list[str]:
    """Delete each word with probability ``p``; if all go, keep one random word (never empty)."""
    if len(words) < 2:
        return list(words)
    kept = [word for word in words if rng.random() > p]
    return kept if kept else [words[rng.randrange(len(words))]]


class SynonymReplacement(WordNetAugmentation):
    """EDA SR: replace ``max(1, floor(α l))`` non-stop words by WordNet synonyms.

    ``alpha=0`` replaces exactly one word. SimCSE Table 1's row is ``augmentation=synonym`` (nlpaug's rule).
    """

    spec: SynonymReplacementSpec

    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        return synonym_replacement(
            words, eda_count(self.spec.alpha, len(words)), rng, self.lexicon, ENGLISH_STOP_WORDS
        )


class RandomInsertion(WordNetAugmentation):
    """EDA RI: insert ``max(1, floor(α l))`` synonyms of random words at random positions."""

    spec: RandomInsertionSpec

    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        return random_insertion(words, eda_count(self.spec.alpha, len(words)), rng, self.lexicon)


class RandomSwap(WordAugmentation):
    """EDA RS: swap two random words, ``max(1, floor(α l))`` times."""

    spec: RandomSwapSpec

    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        return random_swap(words, eda_count(self.spec.alpha, len(words)), rng)


class RandomDeletion(WordAugmentation):
    """EDA RD: delete each word with probability α (one word always survives)."""

    spec: RandomDeletionSpec

    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        return random_deletion(words, self.spec.alpha, rng)
