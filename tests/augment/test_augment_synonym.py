"""augmentation=synonym: nlpaug SynonymAug's counting rule and defaults (SimCSE Table 1's synonym row)."""

from __future__ import annotations

import random

import pytest

from cl_bench.augment.lexicon import load_lexicon
from cl_bench.augment.synonym import SynonymSubstitution, nlpaug_count
from cl_bench.augment.words import split_affixes
from cl_bench.config import yaml_spec

SENTENCE = (
    "The old man plays his guitar on the street every evening while young children dance and happy "
    "neighbours sing quietly along, and the tired dog sleeps near the warm fire of the small house."
)


@pytest.mark.parametrize(
    ("length", "expected"),
    [(0, 0), (1, 1), (3, 1), (4, 2), (10, 3), (11, 4), (33, 10), (34, 10), (100, 10)],
)
def test_count_is_nlpaugs_ceil_then_clamp(length: int, expected: int) -> None:
    """nlpaug base_augmenter._generate_aug_cnt with aug_p 0.3, aug_min 1, aug_max 10."""
    assert nlpaug_count(0.3, 1, 10, length) == expected


def test_defaults_are_nlpaugs_documented_ones() -> None:
    spec = yaml_spec("augmentation", "synonym")
    assert (spec.aug_p, spec.aug_min, spec.aug_max) == (0.3, 1, 10)


@pytest.mark.parametrize(("aug_max", "expected"), [(10, 10), (1, 1)])
def test_replaces_the_counted_number_of_words_with_synonyms(aug_max: int, expected: int) -> None:
    """34 words: ceil(0.3 * 34) = 11, cut to aug_max; each replaced word becomes one of its synonyms."""
    lexicon = load_lexicon()
    words = SENTENCE.split()
    assert len(words) == 34 and sum(bool(lexicon.synonyms(split_affixes(w)[1])) for w in words) >= 10
    aug = SynonymSubstitution(yaml_spec("augmentation", "synonym", aug_max=aug_max))
    aug.setup(None, "")
    for seed in range(5):
        out = aug.augment_words(words, random.Random(seed))  # one element per word
        changed = [(before, after) for before, after in zip(words, out, strict=True) if before != after]
        assert len(changed) == expected
        for before, after in changed:
            prefix, core, suffix = split_affixes(before)
            assert after.startswith(prefix) and after.endswith(suffix)
            assert after[len(prefix): len(after) - len(suffix)].lower() in lexicon.synonyms(core)
        assert aug.augment_text([SENTENCE], random.Random(seed)) == [" ".join(out)]


def test_bad_settings_name_the_key() -> None:
    with pytest.raises(ValueError, match="augmentation.aug_p"):
        yaml_spec("augmentation", "synonym", aug_p=1.5)
    with pytest.raises(ValueError, match=r"augmentation.aug_min: must be <= augmentation.aug_max \(2\), got 3"):
        yaml_spec("augmentation", "synonym", aug_min=3, aug_max=2)
    with pytest.raises(ValueError, match="augmentation.aug_max: must be >= 1, got 0"):
        yaml_spec("augmentation", "synonym", aug_min=0, aug_max=0)
