"""The back-translation cache: a corpus is translated once, keyed by models, settings and corpus hash."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from cl_bench.augment import back_translation
from cl_bench.augment.back_translation import BackTranslation, BackTranslationUnavailable
from cl_bench.config import yaml_spec


class FakeTranslator:
    """Stands in for the two MarianMT models: upper-cases, and counts what it translates."""

    batch_size = 2

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def round_trip(self, sentences: list[str], seed: int | None = None) -> list[str]:
        self.log += sentences
        return [s.upper() for s in sentences]


class Translated(list):
    """The sentences the fake translator translated; ``loads`` counts model loads."""

    loads = 0


@pytest.fixture()
def fake_models(monkeypatch: pytest.MonkeyPatch) -> Translated:
    translated = Translated()

    def from_pretrained(*args: object, **kwargs: object) -> FakeTranslator:
        translated.loads += 1
        return FakeTranslator(translated)

    monkeypatch.setattr(back_translation.BackTranslator, "from_pretrained", staticmethod(from_pretrained))
    return translated


def _augmentation(corpus: Path, cache_dir: Path, **kwargs: object) -> BackTranslation:
    changes = {"limit": None, **kwargs, "corpus_file": str(corpus), "cache_dir": str(cache_dir)}
    augmentation = BackTranslation(yaml_spec("augmentation", "back_translation", **changes))
    augmentation.setup(None, "")
    return augmentation


def test_corpus_is_translated_once_then_read_from_the_cache(fake_models, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man plays\n\nthe dog runs\na cat\n")
    first = _augmentation(corpus, tmp_path / "cache")
    assert fake_models == ["a man plays", "the dog runs", "a cat"]  # the whole corpus, once, at set-up
    assert first.augment_text(["the dog runs", "a cat"], random.Random(0)) == ["THE DOG RUNS", "A CAT"]
    assert len(fake_models) == 3  # training batches are looked up, not translated
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(files) == 2 and files[0].endswith(".json") and files[1].endswith(".txt")

    again = _augmentation(corpus, tmp_path / "cache")  # a later run: no model load, no translation
    assert len(fake_models) == 3 and fake_models.loads == 1
    assert again.augment_text(["a man plays"], random.Random(0)) == ["A MAN PLAYS"]


def test_the_key_covers_models_settings_and_corpus(fake_models, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man plays\nthe dog runs\n")
    cache = tmp_path / "cache"
    _augmentation(corpus, cache)
    _augmentation(corpus, cache, pivot_lang="fr")  # other models
    _augmentation(corpus, cache, num_beams=2)  # other generation settings
    _augmentation(corpus, cache, limit=1)  # another (shorter) corpus
    corpus.write_text("a man plays\nthe dog sleeps\n")
    _augmentation(corpus, cache)  # an edited corpus
    assert len(list(cache.glob("*.txt"))) == 5
    _augmentation(corpus, cache, batch_size=7)  # batching does not change the output: a hit
    assert len(list(cache.glob("*.txt"))) == 5


def test_sampling_and_cache_off_translate_on_the_fly(fake_models, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man plays\nthe dog runs\n")
    for kwargs in ({"do_sample": True}, {"cache": False}):
        augmentation = _augmentation(corpus, tmp_path / "cache", **kwargs)
        assert augmentation.table is None and augmentation.translator is not None
    assert fake_models == [] and not (tmp_path / "cache").exists()


def test_a_miss_without_models_falls_back_or_says_what_to_set(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man plays\n")
    with pytest.raises(BackTranslationUnavailable, match="set augmentation.paraphrase_file"):
        _augmentation(corpus, tmp_path / "cache")  # the hub is offline in tests: nothing to translate with
