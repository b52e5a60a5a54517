"""Text augmentations: what each may and may not change, EDA's α rule, WordNet, seeded determinism."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from cl_bench.augment.base import Augmentation, Dropout
from cl_bench.augment.eda import (
    RandomDeletion,
    RandomInsertion,
    RandomSwap,
    SynonymReplacement,
    eda_count,
    random_deletion,
    random_insertion,
    random_swap,
    synonym_replacement,
)
from cl_bench.augment.lexicon import WORDNET_ENV, LexiconUnavailable, find_wordnet_dir, load_lexicon
from cl_bench.augment.specs import DropoutSpec
from cl_bench.augment.words import Crop, DeleteOneWord, WordDeletion, split_affixes
from cl_bench.config import build_spec, yaml_spec
from cl_bench.specs import AugmentationSpec, build

CONF_AUG = Path(__file__).resolve().parents[2] / "conf" / "augmentation"
OPTIONS = {
    "dropout": "dropout",
    "eda_synonym": "eda_synonym",
    "synonym": "synonym",
    "eda_insert": "eda_insert",
    "eda_swap": "eda_swap",
    "eda_delete": "eda_delete",
    "crop": "crop",
    "word_deletion": "word_deletion",
    "delete_one_word": "delete_one_word",
    "mlm_replace": "mlm_replace",
    "token_cutoff": "token_cutoff",
    "feature_cutoff": "feature_cutoff",
    "span_cutoff": "span_cutoff",
    "back_translation": "back_translation",
    "negation": "negation",
    "word_repetition": "word_repetition",
}
SENTENCES = [
    "A quick brown dog runs across the big green park, chasing a small ball.",
    "The old man plays his guitar on the street every evening.",
    "Children happily ride their new bikes near the river.",
    "Hello",
    "two words",
    "",
]
WORDS = "the quick brown dog runs across the big green park chasing a small red ball".split()


@pytest.fixture(scope="module")
def lexicon():
    return load_lexicon()


def is_subsequence(short: list[str], long: list[str]) -> bool:
    it = iter(long)
    return all(word in it for word in short)


# ----- the option list and its YAMLs ------------------------------------------------------------
def test_every_option_has_a_yaml() -> None:
    assert sorted(p.stem for p in CONF_AUG.glob("*.yaml")) == sorted(OPTIONS)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_augmentation_yaml_is_valid_and_instantiates(option: str) -> None:
    node = OmegaConf.create((CONF_AUG / f"{option}.yaml").read_text())
    if option == "back_translation":
        node.corpus_file = "corpus.txt"  # ${data.train_file} outside a full config
        node.limit = None  # ${data.limit}
    build_spec(node, "augmentation")
    augmentation = build(OmegaConf.to_container(node, resolve=True))
    assert isinstance(augmentation, Augmentation)
    assert augmentation.name == OPTIONS[option]
    assert augmentation.embedding_level == option.endswith("_cutoff")


def test_none_and_dropout_leave_text_unchanged() -> None:
    rng = random.Random(0)
    assert Augmentation(AugmentationSpec()).augment_text(SENTENCES, rng) == SENTENCES
    assert Dropout(DropoutSpec()).augment_text(SENTENCES, rng) == SENTENCES


# ----- SimCSE's word operations -------------------------------------------------------------------
@pytest.mark.parametrize("rate", [0.1, 0.2, 0.3, 0.5])
def test_crop_keeps_one_contiguous_span_of_the_right_length(rate: float) -> None:
    rng = random.Random(1)
    for _ in range(50):
        (out,) = Crop(yaml_spec("augmentation", "crop", rate=rate)).augment_text([" ".join(WORDS)], rng)
        kept = out.split()
        assert len(kept) == len(WORDS) - int(rate * len(WORDS) + 0.5)
        starts = [i for i in range(len(WORDS)) if WORDS[i : i + len(kept)] == kept]
        assert starts, "crop must keep a contiguous span"


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.9])
def test_word_deletion_deletes_the_right_number_and_keeps_order(rate: float) -> None:
    rng = random.Random(2)
    for _ in range(50):
        (out,) = WordDeletion(yaml_spec("augmentation", "word_deletion", rate=rate)).augment_text([" ".join(WORDS)], rng)
        kept = out.split()
        assert len(kept) == len(WORDS) - int(rate * len(WORDS) + 0.5)
        assert is_subsequence(kept, WORDS)


def test_delete_one_word_removes_exactly_one() -> None:
    rng = random.Random(3)
    for _ in range(30):
        (out,) = DeleteOneWord(yaml_spec("augmentation", "delete_one_word")).augment_text([" ".join(WORDS)], rng)
        assert len(out.split()) == len(WORDS) - 1 and is_subsequence(out.split(), WORDS)


@pytest.mark.parametrize(
    "augmentation",
    [
        Crop(yaml_spec("augmentation", "crop", rate=0.9)),
        WordDeletion(yaml_spec("augmentation", "word_deletion", rate=0.99)),
        DeleteOneWord(yaml_spec("augmentation", "delete_one_word")),
        RandomDeletion(yaml_spec("augmentation", "eda_delete", alpha=0.99)),
    ],
    ids=lambda a: a.name,
)
def test_deletions_never_empty_a_sentence(augmentation) -> None:
    rng = random.Random(4)
    for _ in range(20):
        out = augmentation.augment_text(SENTENCES, rng)
        for before, after in zip(SENTENCES, out, strict=True):
            if before.strip():
                assert after.split(), f"{augmentation.name} emptied {before!r}"
            else:
                assert after == before
        assert out[3] == "Hello"  # one word: nothing to remove


@pytest.mark.parametrize(("option", "key"), [("crop", "rate"), ("word_deletion", "rate"), ("eda_swap", "alpha")])
def test_bad_rates_name_their_key(option: str, key: str) -> None:
    with pytest.raises(ValueError, match=f"augmentation.{key}: must be in"):
        yaml_spec("augmentation", option, **{key: 1.5})


# ----- EDA ----------------------------------------------------------------------------------------
def test_eda_alpha_rule() -> None:
    assert (
        eda_count(0.1, 9) == 1
        and eda_count(0.1, 25) == 2
        and eda_count(0.0, 30) == 1
        and eda_count(0.3, 10) == 3
    )


def test_wordnet_comes_from_an_installed_package(lexicon) -> None:
    assert (lexicon.root / "data.noun").stat().st_size > 10_000_000  # the full WordNet 3.0 noun database
    assert "automobile" in lexicon.synonyms("car") and "fast" in lexicon.synonyms("quick")
    assert "dog" in lexicon.synonyms("dogs")  # nltk's morphy lemmatises
    assert "car" not in lexicon.synonyms("car")
    assert list(lexicon.synonyms("happy")) == sorted(lexicon.synonyms("happy"))
    assert lexicon.synonyms("xqzvw") == ()


def test_missing_wordnet_says_how_to_install(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(WORDNET_ENV, str(tmp_path))
    with pytest.raises(LexiconUnavailable, match="not a WordNet dict directory"):
        find_wordnet_dir()


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.3])
def test_synonym_replacement_changes_at_most_n_words_into_their_synonyms(lexicon, alpha: float) -> None:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    rng = random.Random(5)
    for sentence in SENTENCES[:3]:
        words = sentence.split()
        n = eda_count(alpha, len(words))
        for _ in range(10):
            out = synonym_replacement(words, n, rng, lexicon, ENGLISH_STOP_WORDS)
            assert len(out) == len(words)
            changed = {split_affixes(w)[1].lower() for w, o in zip(words, out, strict=True) if w != o}
            assert 1 <= len(changed) <= n
            for before, after in zip(words, out, strict=True):
                if before == after:
                    continue
                b_pre, b_core, b_suf = split_affixes(before)
                assert after.startswith(b_pre) and after.endswith(b_suf)  # punctuation kept
                new_core = after[len(b_pre) : len(after) - len(b_suf)]
                assert new_core.lower() in lexicon.synonyms(b_core)
                assert b_core.lower() not in ENGLISH_STOP_WORDS


def test_synonym_replacement_with_alpha_zero_replaces_one_word(lexicon) -> None:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    aug = SynonymReplacement(yaml_spec("augmentation", "eda_synonym", alpha=0.0))
    aug.setup(None, "")
    words = SENTENCES[1].split()
    for seed in range(10):
        (out,) = aug.augment_text([SENTENCES[1]], random.Random(seed))
        per_word = synonym_replacement(words, 1, random.Random(seed), lexicon, ENGLISH_STOP_WORDS)
        assert out == " ".join(per_word) != SENTENCES[1]
        assert len({w for w, o in zip(words, per_word, strict=True) if w != o}) == 1


def test_random_insertion_only_inserts_synonyms(lexicon) -> None:
    rng = random.Random(7)
    words = SENTENCES[0].split()
    for n in (1, 3):
        for _ in range(10):
            out = random_insertion(words, n, rng, lexicon)
            assert len(out) == len(words) + n  # every sentence word here has WordNet entries to try
            assert is_subsequence(words, out)
            inserted = list((Counter(out) - Counter(words)).elements())
            for synonym in inserted:
                assert any(synonym in lexicon.synonyms(split_affixes(w)[1]) for w in out if w != synonym)


def test_random_insertion_gives_up_without_synonyms(lexicon) -> None:
    assert random_insertion(["xqzvw", "qqqq"], 2, random.Random(0), lexicon) == ["xqzvw", "qqqq"]


def test_random_swap_keeps_the_multiset_of_words() -> None:
    rng = random.Random(8)
    for n in (1, 2, 5):
        for _ in range(20):
            out = random_swap(WORDS, n, rng)
            assert Counter(out) == Counter(WORDS)
            assert sum(a != b for a, b in zip(out, WORDS, strict=True)) <= 2 * n
    assert random_swap(["alone"], 3, rng) == ["alone"]


def test_random_deletion_is_a_subsequence_with_rate_p() -> None:
    rng = random.Random(9)
    kept = 0
    for _ in range(400):
        out = random_deletion(WORDS, 0.25, rng)
        assert out and is_subsequence(out, WORDS)
        kept += len(out)
    assert kept / (400 * len(WORDS)) == pytest.approx(0.75, abs=0.03)
    assert random_deletion(WORDS, 0.0, rng) == WORDS


TEXT_AUGMENTATIONS = [
    Crop(yaml_spec("augmentation", "crop", rate=0.2)),
    WordDeletion(yaml_spec("augmentation", "word_deletion", rate=0.2)),
    DeleteOneWord(yaml_spec("augmentation", "delete_one_word")),
    SynonymReplacement(yaml_spec("augmentation", "eda_synonym", alpha=0.2)),
    RandomInsertion(yaml_spec("augmentation", "eda_insert", alpha=0.2)),
    RandomSwap(yaml_spec("augmentation", "eda_swap", alpha=0.2)),
    RandomDeletion(yaml_spec("augmentation", "eda_delete", alpha=0.2)),
]


@pytest.mark.parametrize("augmentation", TEXT_AUGMENTATIONS, ids=lambda a: a.name)
def test_text_augmentations_are_deterministic_under_a_seed(augmentation) -> None:
    first = augmentation.augment_text(SENTENCES, random.Random(123))
    again = augmentation.augment_text(SENTENCES, random.Random(123))
    other = [augmentation.augment_text(SENTENCES, random.Random(seed)) for seed in range(5)]
    assert first == again
    assert len(first) == len(SENTENCES)
    assert any(o != first for o in other), "different seeds should give different views"
    assert any(a != b for a, b in zip(first, SENTENCES, strict=True))


@pytest.mark.slow  # two fresh interpreters that load torch, scikit-learn and WordNet
def test_synonym_choices_do_not_depend_on_string_hashing() -> None:
    code = (
        "import random; from cl_bench.augment.eda import SynonymReplacement, RandomInsertion;"
        "from cl_bench.augment.specs import RandomInsertionSpec, SynonymReplacementSpec;"
        "s=['A quick brown dog runs across the big green park', 'The old man plays his guitar'];"
        "print(SynonymReplacement(SynonymReplacementSpec(alpha=0.3)).augment_text(s, random.Random(0)),"
        " RandomInsertion(RandomInsertionSpec(alpha=0.3)).augment_text(s, random.Random(0)))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env=dict(os.environ, PYTHONHASHSEED=seed),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1, outputs
