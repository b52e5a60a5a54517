"""Model-based augmentations on tiny random models: MLM word replacement and back-translation."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, MarianConfig, MarianMTModel

from cl_bench.augment.back_translation import (
    BackTranslation,
    BackTranslationUnavailable,
    BackTranslator,
    ParaphraseTable,
    main,
    marian_model_id,
    write_paraphrase_file,
)
from cl_bench.augment.mlm_replace import MLMHeadMissing, MLMReplace
from cl_bench.augment.specs import BackTranslationSpec
from cl_bench.augment.words import split_affixes
from cl_bench.config import yaml_spec
from cl_bench.data.text import DataFileError
from cl_bench.models.encoder import build_encoder


def mlm_replace(**changes) -> MLMReplace:
    """``augmentation=mlm_replace`` with its YAML's values and ``changes``."""
    return MLMReplace(yaml_spec("augmentation", "mlm_replace", **changes))


def generation(**changes) -> dict:
    """The back-translation spec's generation settings (its defaults) with ``changes``."""
    return {**BackTranslationSpec().generation(), **changes}


def back_translation(**changes) -> BackTranslation:
    """``augmentation=back_translation`` with its YAML's values (no corpus, no limit outside a run) and ``changes``."""
    return BackTranslation(yaml_spec("augmentation", "back_translation", **{"corpus_file": None, "limit": None, **changes}))


SENTENCES = [
    "a man plays the guitar in the street.",
    "the dog runs in the park with two children",
    "She reads a book, happy",
    "sun",
    "",
]


@pytest.fixture(scope="module")
def tiny_mlm(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BertForMaskedLM (encoder + MLM head) with the tiny WordPiece tokenizer."""
    out = tmp_path_factory.mktemp("tiny_mlm")
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig.from_pretrained(tiny_bert)).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def mlm_augmentation(tiny_mlm: Path) -> MLMReplace:
    augmentation = mlm_replace(probability=0.15, top_k=20)
    augmentation.setup(build_encoder(str(tiny_mlm), pooler="cls"), str(tiny_mlm))
    return augmentation


# ----- MLM replacement ------------------------------------------------------------------------------
@pytest.mark.parametrize("probability", [0.15, 0.5, 1.0])
def test_mlm_replaces_exactly_the_chosen_number_of_words(tiny_mlm: Path, probability: float) -> None:
    augmentation = mlm_replace(probability=probability, top_k=20)
    augmentation.setup(build_encoder(str(tiny_mlm), pooler="cls"), str(tiny_mlm))
    rng = random.Random(0)
    for _ in range(5):
        out = augmentation.augment_text(SENTENCES, rng)
        assert len(out) == len(SENTENCES) and out[-1] == ""
        for before, after in zip(SENTENCES[:-1], out[:-1], strict=True):
            words, new = before.split(), after.split()
            assert len(new) == len(words), "one word in, one word out"
            changed = [i for i, (w, n) in enumerate(zip(words, new, strict=True)) if w != n]
            assert len(changed) == min(len(words), max(1, int(probability * len(words) + 0.5)))
            for i in changed:
                (pre, core, suf), (new_pre, new_core, new_suf) = (
                    split_affixes(words[i]),
                    split_affixes(new[i]),
                )
                assert (new_pre, new_suf) == (pre, suf), "punctuation around the word is kept"
                assert new_core and new_core.lower() != core.lower() and not new_core.startswith("##")
                assert "[" not in new_core, "never a special token"


def test_mlm_is_deterministic_under_a_seed(mlm_augmentation: MLMReplace) -> None:
    first = mlm_augmentation.augment_text(SENTENCES, random.Random(3))
    assert first == mlm_augmentation.augment_text(SENTENCES, random.Random(3))
    assert any(mlm_augmentation.augment_text(SENTENCES, random.Random(s)) != first for s in range(4, 8))


def test_mlm_model_is_a_frozen_copy(mlm_augmentation: MLMReplace) -> None:
    assert not mlm_augmentation.model.training
    assert not any(p.requires_grad for p in mlm_augmentation.model.parameters())
    encoder_params = {id(p) for p in mlm_augmentation._encoder.parameters()}
    assert not encoder_params & {id(p) for p in mlm_augmentation.model.parameters()}


def test_mlm_without_a_trained_head_is_an_error(tiny_bert: Path) -> None:
    augmentation = mlm_replace()
    with pytest.raises(MLMHeadMissing, match="augmentation.mlm_model: .* has no trained MLM head"):
        augmentation.setup(build_encoder(str(tiny_bert), pooler="cls"), str(tiny_bert))


def test_mlm_model_can_differ_from_the_encoder(tiny_bert: Path, tiny_mlm: Path) -> None:
    augmentation = mlm_replace(mlm_model=str(tiny_mlm), top_k=1)
    augmentation.setup(build_encoder(str(tiny_bert), pooler="cls"), str(tiny_bert))  # encoder has no head
    (out,) = augmentation.augment_text(["a man plays the guitar"], random.Random(0))
    assert out != "a man plays the guitar" and len(out.split()) == 5


def test_mlm_arguments_are_validated() -> None:
    with pytest.raises(ValueError, match="augmentation.probability"):
        mlm_replace(probability=0.0)
    with pytest.raises(ValueError, match="augmentation.top_k"):
        mlm_replace(top_k=0)


# ----- back-translation ------------------------------------------------------------------------------
def tiny_marian(tokenizer, seed: int) -> MarianMTModel:
    torch.manual_seed(seed)
    config = MarianConfig(
        vocab_size=len(tokenizer),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
    )
    return MarianMTModel(config)


class Recorder:
    """Wraps a model's ``generate`` to record what each direction was asked to translate."""

    def __init__(self, model, tokenizer, calls: list, name: str) -> None:
        self.model, self.tokenizer, self.calls, self.name = model, tokenizer, calls, name
        original = model.generate

        def generate(**kwargs):
            self.calls.append((name, tokenizer.batch_decode(kwargs["input_ids"], skip_special_tokens=True)))
            return original(**kwargs)

        model.generate = generate


@pytest.fixture(scope="module")
def tokenizer(tiny_bert: Path):
    return AutoTokenizer.from_pretrained(tiny_bert)


def test_round_trip_goes_through_the_pivot_and_back(tokenizer) -> None:
    calls: list = []
    forward, backward = tiny_marian(tokenizer, 0), tiny_marian(tokenizer, 1)
    Recorder(forward, tokenizer, calls, "forward")
    Recorder(backward, tokenizer, calls, "backward")
    translator = BackTranslator(forward, tokenizer, backward, tokenizer, **generation(num_beams=2, max_length=12, batch_size=2))
    sentences = SENTENCES[:4]
    pivot = translator.translate(sentences, forward, tokenizer)
    calls.clear()
    out = translator.round_trip(sentences)
    assert len(out) == len(sentences)
    assert [name for name, _ in calls] == ["forward", "forward", "backward", "backward"]  # batches of 2
    # The backward model translates exactly the forward model's output, in order.
    backward_inputs = [text for name, texts in calls if name == "backward" for text in texts]
    assert backward_inputs == [
        tokenizer.decode(tokenizer(p)["input_ids"], skip_special_tokens=True) for p in pivot
    ]
    assert out == translator.round_trip(sentences), "beam search is deterministic"


def test_sampled_round_trip_is_seeded(tokenizer) -> None:
    translator = BackTranslator(
        tiny_marian(tokenizer, 0),
        tokenizer,
        tiny_marian(tokenizer, 1),
        tokenizer,
        **generation(do_sample=True, max_length=12),
    )
    state = torch.get_rng_state()
    first = translator.round_trip(SENTENCES[:4], seed=5)
    assert torch.equal(torch.get_rng_state(), state), "the global RNG is left as it was"
    assert first == translator.round_trip(SENTENCES[:4], seed=5)
    assert any(translator.round_trip(SENTENCES[:4], seed=s) != first for s in range(6, 9))


def test_empty_translation_falls_back_to_the_original(tokenizer) -> None:
    translator = BackTranslator(
        tiny_marian(tokenizer, 0), tokenizer, tiny_marian(tokenizer, 1), tokenizer, **generation(max_length=12)
    )
    translator.translate = lambda sentences, model, tok, seed=None: ["" for _ in sentences]
    assert translator.round_trip(["the dog runs"]) == ["the dog runs"]


@pytest.fixture(scope="module")
def marian_dirs(tokenizer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    dirs = []
    for seed, name in ((0, "en-xx"), (1, "xx-en")):
        out = tmp_path_factory.mktemp(name)
        tiny_marian(tokenizer, seed).save_pretrained(out)
        tokenizer.save_pretrained(out)
        dirs.append(out)
    return dirs[0], dirs[1]


def test_from_pretrained_loads_local_models(marian_dirs, tokenizer) -> None:
    loaded = BackTranslator.from_pretrained(
        "en", "de", str(marian_dirs[0]), str(marian_dirs[1]), **generation(num_beams=2, max_length=12)
    )
    direct = BackTranslator(
        tiny_marian(tokenizer, 0), tokenizer, tiny_marian(tokenizer, 1), tokenizer, **generation(num_beams=2, max_length=12)
    )
    assert loaded.round_trip(SENTENCES[:3]) == direct.round_trip(SENTENCES[:3])


def test_unloadable_models_raise_one_clear_error() -> None:
    assert marian_model_id("en", "fr") == "Helsinki-NLP/opus-mt-en-fr"
    with pytest.raises(
        BackTranslationUnavailable, match="cannot load translation model 'Helsinki-NLP/opus-mt-en-fr'"
    ):
        BackTranslator.from_pretrained("en", "fr", None, None, **generation())  # the hub is offline in tests


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man plays the guitar\n\nthe dog runs\n")
    paraphrases = tmp_path / "paraphrases.txt"
    paraphrases.write_text("a guy plays guitar\n\nthe hound is running\n")
    return corpus, paraphrases


def test_paraphrase_table_reads_line_aligned_files(corpus) -> None:
    table = ParaphraseTable.from_files(*corpus)
    assert table.lookup(["the dog runs", " a man plays the guitar "]) == [
        "the hound is running",
        "a guy plays guitar",
    ]
    with pytest.raises(KeyError, match="no paraphrase for 'a cat'"):
        table.lookup(["a cat"])


def test_paraphrase_file_errors_name_the_file(corpus, tmp_path: Path) -> None:
    corpus_file, paraphrases = corpus
    with pytest.raises(
        DataFileError,
        match="augmentation.paraphrase_file: file not found: .*python -m cl_bench.augment.back_translation",
    ):
        ParaphraseTable.from_files(corpus_file, tmp_path / "missing.txt")
    paraphrases.write_text("a guy plays guitar\n\n")
    with pytest.raises(DataFileError, match="2 lines, but .*corpus.txt has 3"):
        ParaphraseTable.from_files(corpus_file, paraphrases)
    paraphrases.write_text("a guy plays guitar\n\n \n")
    with pytest.raises(DataFileError, match="paraphrases.txt:3: empty paraphrase"):
        ParaphraseTable.from_files(corpus_file, paraphrases)


def test_back_translation_falls_back_to_the_paraphrase_file_offline(corpus) -> None:
    augmentation = back_translation(paraphrase_file=str(corpus[1]), corpus_file=str(corpus[0]))
    augmentation.setup(None, "")
    assert augmentation.translator is None
    assert augmentation.augment_text(["the dog runs"], random.Random(0)) == ["the hound is running"]


def test_back_translation_without_models_or_file_says_what_to_set(corpus) -> None:
    with pytest.raises(BackTranslationUnavailable, match="set augmentation.paraphrase_file"):
        back_translation(corpus_file=str(corpus[0])).setup(None, "")
    with pytest.raises(BackTranslationUnavailable, match="needs augmentation.paraphrase_file"):
        back_translation(source="file").setup(None, "")
    with pytest.raises(ValueError, match=r"augmentation.source: Invalid value .web., expected one of \[auto, models, file\]"):
        back_translation(source="web")


def test_back_translation_uses_the_models_when_they_load(marian_dirs, corpus) -> None:
    augmentation = back_translation(
        forward_model=str(marian_dirs[0]), backward_model=str(marian_dirs[1]), num_beams=1, max_length=10
    )
    augmentation.setup(None, "")
    assert augmentation.translator is not None and augmentation.table is None
    out = augmentation.augment_text(["the dog runs", "a man"], random.Random(0))
    assert out == augmentation.translator.round_trip(["the dog runs", "a man"])


def test_paraphrase_file_written_by_the_cli_round_trips(marian_dirs, corpus, tmp_path: Path) -> None:
    corpus_file = corpus[0]
    out_file = tmp_path / "bt" / "para.txt"
    main(
        [
            str(corpus_file),
            str(out_file),
            "--forward-model",
            str(marian_dirs[0]),
            "--backward-model",
            str(marian_dirs[1]),
            "--device",
            "cpu",
            "--num-beams",
            "1",
            "--batch-size",
            "2",
            "--max-length",
            "12",
        ]
    )
    lines = out_file.read_text().split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[0] and lines[2]  # blank corpus line stays blank
    table = ParaphraseTable.from_files(corpus_file, out_file)
    translator = BackTranslator.from_pretrained(
        "en", "de", str(marian_dirs[0]), str(marian_dirs[1]), **generation(num_beams=1, max_length=12)
    )
    assert table.lookup(["a man plays the guitar", "the dog runs"]) == translator.round_trip(
        ["a man plays the guitar", "the dog runs"]
    )
    assert write_paraphrase_file(corpus_file, tmp_path / "again.txt", translator) == 2
