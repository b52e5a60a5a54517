"""``pooler=prompt_last`` (PromptEOL) builds the token ids of kongds/scaling_sentemb: the filled-in template
tokenised as one string, at evaluation (evaluation.py's batcher, period rule included) and in training
(ft_llm.py: the sentence cut to ``cutoff_len`` tokens). The reference ids were computed by running the
official functions in a scratch environment (tests/reference_data/prompteol_ids.json says how) on two
tokenizers built offline here: a byte-level BPE and a SentencePiece BPE, both with merges across the
template's boundary (``."``), where joining separately tokenised pieces differs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from tiny_decoders import PROMPT_TOKENIZERS, build_prompt_tokenizer

from cl_bench.models.prompts import PROMPTEOL_TEMPLATE, PromptLayout, tokenize_with_prompts, with_period

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "reference_data" / "prompteol_ids.json").read_text())


@pytest.fixture(scope="module", params=PROMPT_TOKENIZERS)
def tokenizer(request, tmp_path_factory):
    from transformers import AutoTokenizer

    kind = request.param
    tok = AutoTokenizer.from_pretrained(str(build_prompt_tokenizer(kind, tmp_path_factory.mktemp(kind))))
    vocab = hashlib.sha256(json.dumps(sorted(tok.get_vocab().items())).encode()).hexdigest()
    assert vocab == REFERENCE[kind]["vocab_sha256"], f"the {kind} test tokenizer is not the one the reference ids were made with"
    return kind, tok


def test_the_official_template_is_cl_benchs() -> None:
    assert REFERENCE["template"].replace("_", " ").replace("*sent 0*", "[X]") == PROMPTEOL_TEMPLATE


def test_evaluation_ids_equal_scaling_sentembs(tokenizer) -> None:
    kind, tok = tokenizer
    layout = PromptLayout.build(tok, PROMPTEOL_TEMPLATE, whole_text=True)
    texts = [with_period(s, "prompteol", training=False) for s in REFERENCE["sentences"]]
    got = tokenize_with_prompts(tok, texts, [layout] * len(texts), 512, pad=False)
    assert got["input_ids"] == REFERENCE[kind]["evaluation_ids"]
    # the pooled position is the template's last token (scaling_sentemb reads hidden_states[-1][:, -1])
    assert [info[4] for info in got["prompt_layout"]] == [len(ids) - 1 for ids in got["input_ids"]]


def test_training_ids_equal_scaling_sentembs(tokenizer) -> None:
    kind, tok = tokenizer
    layout = PromptLayout.build(tok, PROMPTEOL_TEMPLATE, whole_text=True)
    texts = [with_period(s, "prompteol", training=True) for s in REFERENCE["sentences"]]
    got = tokenize_with_prompts(tok, texts, [layout] * len(texts), REFERENCE["cutoff_len"], pad=False)
    assert got["input_ids"] == REFERENCE[kind]["training_ids"]


def test_piecewise_join_differs_where_merges_cross_the_boundary(tokenizer) -> None:
    """Why the whole string matters: the joined pieces miss the reference's ids on these tokenizers."""
    kind, tok = tokenizer
    pieces = PromptLayout.build(tok, PROMPTEOL_TEMPLATE)
    texts = [with_period(s, "prompteol", training=False) for s in REFERENCE["sentences"]]
    joined = tokenize_with_prompts(tok, texts, [pieces] * len(texts), 512, pad=False)["input_ids"]
    assert sum(a != b for a, b in zip(joined, REFERENCE[kind]["evaluation_ids"], strict=True)) >= 2


def test_encoder_with_prompt_last_tokenises_the_whole_string(tmp_path: Path) -> None:
    """The encoder's own path (``model.prompt``, ``pooler=prompt_last``) builds the reference's ids."""
    from tiny_decoders import build_tiny_decoder
    from transformers import AutoTokenizer

    from cl_bench.models.encoder import build_encoder

    model_dir = build_tiny_decoder("llama", tmp_path / "llama")
    tok_dir = build_prompt_tokenizer("byte_level_bpe", tmp_path / "tok")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (model_dir / name).write_bytes((tok_dir / name).read_bytes())
    encoder = build_encoder(str(model_dir), pooler="prompt_last", prompt=PROMPTEOL_TEMPLATE, prompt_period="prompteol")
    ids = encoder._token_ids(REFERENCE["sentences"])["input_ids"]  # noqa: SLF001 - what encode() feeds the model
    assert ids == REFERENCE["byte_level_bpe"]["evaluation_ids"]
    assert AutoTokenizer.from_pretrained(str(tok_dir)).get_vocab() == encoder.tokenizer.get_vocab()
