"""Word repetition (ESimCSE, Wu et al., COLING 2022): a few words or subword tokens of a sentence are repeated.

The rule of the official code (caskcsg/sentemb ESimCSE/train.py ``prepare_features``, l. 461-527, commit
5eeec55), with ``r = dup_rate``:

* ``dup_type=word``: the sentence split on single spaces into L words; ``k = randrange(min(10, L, max(2,
  int(r·L))))`` positions drawn without replacement from ``range(0, L−1)`` (never the last word); each
  chosen word is followed by a copy of itself.
* ``dup_type=bpe`` (the official run script's choice): the token ids of the sentence as the training
  tokenizer makes them (with [CLS]/[SEP], truncated at the training length), L of them; when
  ``int(r·L) > 0``, ``k = randrange(min(10, int(r·L)))`` positions drawn from ``range(1, L−1)`` (never
  [CLS] or the final [SEP]); each chosen token is written twice. The result is not truncated again.

:meth:`WordRepetition.repeat_token_ids` applies the ``bpe`` rule to token ids: a method that tokenizes
itself (ESimCSE) uses it and gets the official inputs exactly. Through :meth:`augment_text` (every other
method) the repeated subword tokens are joined back into text, which the encoder re-tokenizes: a
repeated word-piece (``##ing``) can then be split differently than the ids the rule wrote.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from cl_bench.augment.base import Augmentation
from cl_bench.augment.specs import WordRepetitionSpec


def repeat_words(sentence: str, dup_rate: float, rng: random.Random) -> str:
    """The official ``dup_type=word`` rule on one sentence (words are ``sentence.split(' ')``)."""
    words = sentence.split(" ")
    length = len(words)
    if length == 0:
        return sentence
    count = rng.randrange(min(10, length, max(2, int(dup_rate * length))))
    chosen = sorted(rng.sample(range(0, length - 1), count))
    for i in chosen:
        words[i] = words[i] + " " + words[i]
    return " ".join(words)


def repeat_tokens(ids: Sequence[int], dup_rate: float, rng: random.Random) -> list[int]:
    """The official ``dup_type=bpe`` rule on one sentence's token ids (with its [CLS] ... [SEP])."""
    length = len(ids)
    if int(dup_rate * length) <= 0:
        return list(ids)
    count = rng.randrange(min(10, int(dup_rate * length)))
    # min(): at rates near 1 the official sample() would ask for more positions than there are
    chosen = set(rng.sample(range(1, length - 1), min(count, max(length - 2, 0))))
    out: list[int] = []
    for i, token in enumerate(ids):
        if i in chosen:
            out.append(token)
        out.append(token)
    return out


class WordRepetition(Augmentation):
    """ESimCSE's positive: the sentence with some words (``word``) or subword tokens (``bpe``) repeated.

    Keys: declared on its spec (:class:`~cl_bench.augment.specs.WordRepetitionSpec`).
    """

    spec: WordRepetitionSpec

    def __init__(self, spec: WordRepetitionSpec) -> None:
        super().__init__(spec)
        self.tokenizer: Any = None
        self.max_length = 32

    def setup(self, encoder: Any, model_name_or_path: str) -> None:
        """Keep the encoder's tokenizer and training length (the ``bpe`` rule works on its token ids)."""
        self.tokenizer = encoder.tokenizer
        self.max_length = int(encoder.max_length)

    @property
    def token_level(self) -> bool:
        """True when the rule works on token ids (``bpe``): :meth:`repeat_token_ids` gives the exact inputs."""
        return self.spec.dup_type == "bpe"

    def repeat_token_ids(self, ids: Sequence[Sequence[int]], rng: random.Random) -> list[list[int]]:
        """The ``bpe`` rule on each sentence's token ids (as the training tokenizer made them)."""
        return [repeat_tokens(row, self.spec.dup_rate, rng) for row in ids]

    def augment_text(self, sentences: Sequence[str], rng: random.Random) -> list[str]:
        """One repeated view of each sentence: the ``word`` rule, or the ``bpe`` rule joined back into text."""
        if self.spec.dup_type == "word":
            return [repeat_words(s, self.spec.dup_rate, rng) for s in sentences]
        if self.tokenizer is None:
            raise RuntimeError("augmentation=word_repetition with dup_type=bpe needs setup() (the encoder's tokenizer)")
        ids = self.tokenizer(list(sentences), truncation=True, max_length=self.max_length)["input_ids"]
        special = set(self.tokenizer.all_special_ids)
        out = []
        for row in self.repeat_token_ids(ids, rng):
            tokens = self.tokenizer.convert_ids_to_tokens([t for t in row if t not in special])
            out.append(self.tokenizer.convert_tokens_to_string(tokens))
        return out
