"""Synonym replacement with nlpaug's rule (``nlpaug.augmenter.word.SynonymAug``), which SimCSE's Table 1 used.

nlpaug's ``SynonymAug(aug_src="wordnet")`` (nlpaug/augmenter/word/synonym.py, its documented
defaults ``aug_p=0.3, aug_min=1, aug_max=10``, no stop words) replaces
``n = clamp(ceil(aug_p * tokens), aug_min, aug_max)`` distinct token positions, drawn among the
non-punctuation tokens that have a WordNet synonym (fewer when fewer have one); each gets one random
synonym other than itself, lowercased, ``_``/``-`` turned into spaces, with the original's initial
capital (``nlpaug/base_augmenter.py: _generate_aug_cnt``, ``synonym.py: _get_aug_idxes, substitute``).

What differs from nlpaug, and why: tokens are whitespace words with their punctuation attached
(nlpaug's tokenizer splits punctuation off and counts it in ``tokens``, so its ``n`` can be one word
higher on punctuated sentences); synonyms are the lemmas of all the word's synsets, where nlpaug keeps
those of the part of speech nltk's tagger gives it (the tagger's model is not installed offline).
"""

from __future__ import annotations

import math
import random

from cl_bench.augment.specs import SynonymSubstitutionSpec
from cl_bench.augment.words import WordNetAugmentation, split_affixes, with_case_of


def nlpaug_count(aug_p: float, aug_min: int, aug_max: int, length: int) -> int:
    """nlpaug's number of tokens to change: ``ceil(aug_p * length)``, raised to ``aug_min``, cut to ``aug_max``."""
    if length == 0:
        return 0
    count = math.ceil(aug_p * length)
    if aug_min and count < aug_min:
        return aug_min
    if aug_max and count > aug_max:
        return aug_max
    return count


class SynonymSubstitution(WordNetAugmentation):
    """Replace ``clamp(ceil(aug_p * words), aug_min, aug_max)`` random words that have WordNet synonyms.

    Keys: declared on its spec (:class:`~cl_bench.augment.specs.SynonymSubstitutionSpec`).
    """

    spec: SynonymSubstitutionSpec

    def augment_words(self, words: list[str], rng: random.Random) -> list[str]:
        count = nlpaug_count(self.spec.aug_p, self.spec.aug_min, self.spec.aug_max, len(words))
        candidates = [i for i, word in enumerate(words) if self.lexicon.synonyms(split_affixes(word)[1])]
        out = list(words)
        for i in sorted(rng.sample(candidates, min(count, len(candidates)))):
            prefix, core, suffix = split_affixes(words[i])
            out[i] = prefix + with_case_of(core, rng.choice(self.lexicon.synonyms(core))) + suffix
        return out
