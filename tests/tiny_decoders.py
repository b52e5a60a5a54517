"""Tiny random decoder language models (Llama, Qwen2, Mistral, GPT-2) with byte-level BPE tokenizers,
built and saved locally (no download), for the decoder tests (tests/models/test_decoders.py)."""

from __future__ import annotations

from pathlib import Path

#: families the tests cover; each a model_type with a tokenizer convention of its own
FAMILIES: tuple[str, ...] = ("llama", "qwen2", "mistral", "gpt2")

_TEXT = (
    "a man plays the guitar . two children are playing with a red ball in the park . the dog runs fast . "
    "people sit at a big old table and read a book in the sun . a woman is riding a bike on the street . "
    "the cat sits on the chair . three people walk in the green field . music , food , water and trees ."
)


def _bpe(special: list[str]):
    """A byte-level BPE (GPT-2/Qwen2/Llama-3 style) trained on a few sentences; ~400 entries."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([_TEXT] * 4, trainer)
    return tok


def build_tiny_decoder(family: str, out_dir: Path, hidden: int = 32, layers: int = 2, seed: int = 0,
                       sliding_window: int | None = None) -> Path:
    """Save a tiny random ``family`` model and a tokenizer with that family's conventions to ``out_dir``.

    Llama and Mistral: ``<s>`` prepended (their tokenizers' BOS), no EOS appended, no pad token.
    Qwen2: nothing added, pad token ``<|endoftext|>`` (= EOS, as Qwen2 base models). GPT-2: nothing added,
    no pad token, EOS = BOS = ``<|endoftext|>``. ``sliding_window`` (Mistral, Qwen2): attention within that
    many tokens in every layer (transformers' default: Mistral 4096, Qwen2 none).
    """
    import torch
    from tokenizers import processors
    from transformers import AutoConfig, AutoModel, PreTrainedTokenizerFast

    out_dir.mkdir(parents=True, exist_ok=True)
    if family in ("llama", "mistral"):
        tok = _bpe(["<unk>", "<s>", "</s>"])
        bos = tok.token_to_id("<s>")
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
        ids = {"bos_token_id": bos, "eos_token_id": tok.token_to_id("</s>"), "pad_token_id": None}
    elif family == "qwen2":
        tok = _bpe(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
        eos = tok.token_to_id("<|endoftext|>")
        ids = {"bos_token_id": None, "eos_token_id": eos, "pad_token_id": eos}
    elif family == "gpt2":
        tok = _bpe(["<|endoftext|>"])
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
        eos = tok.token_to_id("<|endoftext|>")
        ids = {"bos_token_id": eos, "eos_token_id": eos}
    else:
        raise ValueError(f"unknown family {family}; valid: {', '.join(FAMILIES)}")
    tokenizer.model_max_length = 128
    tokenizer.save_pretrained(out_dir)
    vocab = tok.get_vocab_size()
    if family == "gpt2":
        config = AutoConfig.for_model("gpt2", vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=2,
                                      n_positions=128, **ids)
    else:
        window: dict = {}
        if sliding_window is not None and family == "mistral":
            window = {"sliding_window": sliding_window}
        elif sliding_window is not None and family == "qwen2":
            window = {"sliding_window": sliding_window, "use_sliding_window": True, "max_window_layers": 0}
        elif sliding_window is not None:
            raise ValueError(f"sliding_window: {family} has no sliding-window attention")
        config = AutoConfig.for_model(family, vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                                      num_attention_heads=2, num_key_value_heads=1, intermediate_size=hidden * 2,
                                      max_position_embeddings=128, **ids, **window)
    torch.manual_seed(seed)
    AutoModel.from_config(config).save_pretrained(out_dir)
    return out_dir


#: text the prompt tokenizers learn from: PromptEOL's template filled in, so that merges cross the
#: template's boundary with the sentence (``."``, ``Ġ"a``), where piecewise tokenisation differs
_PROMPT_TEXT = " ".join(
    f'This sentence : "{s}" means in one word:"' for s in _TEXT.replace(" .", ".|").split("|") if s.strip()
)
#: the prompt tokenizers' kinds: a GPT-2/Llama-3-style byte-level BPE and a Llama-2-style SentencePiece BPE
PROMPT_TOKENIZERS: tuple[str, ...] = ("byte_level_bpe", "sentencepiece")


def build_prompt_tokenizer(kind: str, out_dir: Path) -> Path:
    """Save a small tokenizer of ``kind`` (:data:`PROMPT_TOKENIZERS`) trained on filled-in PromptEOL templates,
    ``<s>`` prepended as Llama's, to ``out_dir`` (no download; the ``tokenizers`` library's trainers)."""
    from tokenizers import (
        SentencePieceBPETokenizer,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    special = ["<unk>", "<s>", "</s>"]
    if kind == "byte_level_bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=special,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tok.train_from_iterator([_PROMPT_TEXT] * 4, trainer)
    elif kind == "sentencepiece":
        sp = SentencePieceBPETokenizer(unk_token="<unk>")
        sp.train_from_iterator([_PROMPT_TEXT] * 4, vocab_size=200, special_tokens=special, show_progress=False)
        tok = sp._tokenizer  # noqa: SLF001 - the Tokenizer the wrapper trains
    else:
        raise ValueError(f"unknown tokenizer kind {kind}; valid: {', '.join(PROMPT_TOKENIZERS)}")
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir
