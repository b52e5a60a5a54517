"""Prompts around the sentence: one machinery for training and evaluation alike.

A prompt is either a prefix (``"query: "``, E5/BGE style: the sentence follows it) or a template
with the slot ``[X]`` for the sentence (PromptBERT's ``This sentence of "[X]" means [MASK].``,
PromptEOL's ``This sentence : "[X]" means in one word:"``). ``[MASK]`` in a prompt stands for the
tokenizer's own mask token (``<mask>`` for RoBERTa).

The token ids are built piecewise, as PromptBERT's ``train.py`` builds them: the tokenizer's leading
special tokens, the prefix's tokens, the sentence's own tokens (cut to the sentence budget), the
suffix's tokens and the trailing special tokens. With a WordPiece tokenizer the ids equal tokenizing
the filled-in template as one string (PromptBERT's ``evaluation.py``), which a test asserts.

``pooler=prompt_last`` (PromptEOL) instead tokenises the filled-in template as one string, as
kongds/scaling_sentemb does (evaluation.py's batcher and ft_llm.py's ``generate_sentemb_prompt``): with a
byte-level BPE or SentencePiece tokenizer the piecewise join differs (``."`` is one token of the string, two
pieces joined), so a layout built with ``whole_text=True`` fills the template in and tokenises the string;
a sentence over its budget is cut to its first tokens and decoded back to text first (ft_llm.py's cut).

Each row carries its layout (``prompt_layout``, (B, 6) long: lead, sentence length, suffix length,
``[MASK]`` rank, last prompt-token rank — ranks count the row's tokens from its first real one — and the
position of that first token, i.e. the left padding), so a batch may mix prompts (one per view:
``model.view_prompts``) and either padding side, and an augmentation that later edits the attention mask
(token cutoff) moves no pooled position; the poolers read:

* :func:`prompt_pool_mask`: the attention mask without the leading special tokens and prefix tokens,
  and without the suffix's tokens (sentence-transformers' ``include_prompt=False`` drops
  ``attention_mask[:, :prompt_length]``, where ``prompt_length`` counts [CLS] and the prompt's tokens);
* :func:`prompt_token_index`: the position of ``[MASK]`` (``pooler=mask``) or of the prompt's last
  token before the trailing special tokens (``pooler=prompt_last``);
* :func:`template_mask_states`: PromptBERT's template denoising — the ``[MASK]`` state of the
  template alone, its suffix's positions shifted by the sentence length it stands in for.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads with the model: the prompt checks run before it (cl-bench's early checks)
    import torch

SENTENCE_SLOT = "[X]"
MASK_PLACEHOLDER = "[MASK]"
#: PromptBERT's template without training (kongds/Prompt-BERT run.sh, "bert-prompt": 67.85 STS avg)
PROMPTBERT_TEMPLATE = 'This sentence : "[X]" means [MASK].'
#: PromptEOL (kongds/scaling_sentemb): the last token of this template is the sentence embedding
PROMPTEOL_TEMPLATE = 'This sentence : "[X]" means in one word:"'
#: the template a prompt pooler uses when no ``model.prompt`` is given
DEFAULT_TEMPLATES = {"mask": PROMPTBERT_TEMPLATE, "prompt_last": PROMPTEOL_TEMPLATE}
#: ``model.prompt_period``: how a final period is added to the sentence inside the prompt
#: * ``none``: never;
#: * ``promptbert``: at evaluation only, ``.`` appended unless the sentence ends in . ? " '
#:   (Prompt-BERT evaluation.py's batcher; its training appends nothing);
#: * ``sncse``: in training and evaluation, `` .`` appended unless the sentence ends in any of
#:   ``string.punctuation`` (SNCSE train_SNCSE.py and bert_prediction.py);
#: * ``prompteol``: at evaluation only, as ``promptbert``, then ``"`` -> ``'`` and a final ``?`` -> ``.``
#:   (kongds/scaling_sentemb evaluation.py l.197-200).
PeriodRule = StrEnum("PeriodRule", "none promptbert sncse prompteol")
_LAYOUT_FIELDS = 6


def split_template(prompt: str) -> tuple[str, str]:
    """``(prefix, suffix)`` of a prompt: around ``[X]``, or the whole prompt as a prefix."""
    prefix, _, suffix = prompt.partition(SENTENCE_SLOT)
    return prefix, suffix


def check_prompt(prompt: str, key: str, pooler: str | None = None) -> None:
    """Raise ``ValueError("<key>: ...")`` for a prompt that cannot be built or pooled.

    A prompt has at most one ``[X]`` and one ``[MASK]``; ``pooler=mask`` needs a ``[MASK]``.
    """
    if prompt.count(SENTENCE_SLOT) > 1:
        raise ValueError(f"{key}: more than one {SENTENCE_SLOT} slot in {prompt!r}")
    if prompt.count(MASK_PLACEHOLDER) > 1:
        raise ValueError(f"{key}: more than one {MASK_PLACEHOLDER} in {prompt!r}")
    if pooler == "mask" and MASK_PLACEHOLDER not in prompt:
        raise ValueError(f"{key}: pooler=mask reads the state at {MASK_PLACEHOLDER}, and {prompt!r} has none")


def with_period(sentence: str, rule: str, training: bool) -> str:
    """``sentence`` with the final period of ``rule`` (:data:`PeriodRule`) where it applies."""
    stripped = sentence.strip()
    if rule == "promptbert" and not training and stripped and stripped[-1] not in ".?\"'":
        return sentence + "."
    if rule == "sncse" and stripped and stripped[-1] not in string.punctuation:
        return sentence + " ."
    if rule == "prompteol" and not training:
        sentence = with_period(sentence, "promptbert", training=False).replace('"', "'")
        return sentence[:-1] + "." if sentence.endswith("?") else sentence
    return sentence


def special_tokens_around(tokenizer: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The special tokens the tokenizer puts before and after a text (([CLS],), ([SEP],) for BERT),
    read off a probe text tokenized with and without them."""
    probe = "hello world"
    inner = tokenizer(probe, add_special_tokens=False)["input_ids"]
    outer = tokenizer(probe)["input_ids"]
    for start in range(len(outer) - len(inner) + 1):
        if outer[start : start + len(inner)] == inner:
            return tuple(outer[:start]), tuple(outer[start + len(inner):])
    raise ValueError("model.prompt: cannot find where the tokenizer places a text among its special tokens")


@dataclass(frozen=True)
class PromptLayout:
    """One prompt, tokenized once: the pieces every prompted row is assembled from.

    Attributes:
        prompt: the prompt text.
        head: the tokenizer's leading special tokens ([CLS], <s>, a BOS).
        prefix: token ids of the text before ``[X]``.
        suffix: token ids of the text after ``[X]``.
        tail: the trailing special tokens ([SEP], </s>).
        mask_offset: where ``[MASK]`` is: ``("prefix"|"suffix", index)``, or None.
        prefix_text: the text before ``[X]`` (``[MASK]`` replaced by the mask token).
        suffix_text: the text after ``[X]`` (likewise).
        whole_text: rows are the filled-in template tokenised as one string (PromptEOL), not joined pieces.
    """

    prompt: str
    head: tuple[int, ...]
    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    tail: tuple[int, ...]
    mask_offset: tuple[str, int] | None
    prefix_text: str = ""
    suffix_text: str = ""
    whole_text: bool = False

    @classmethod
    def build(cls, tokenizer: Any, prompt: str, whole_text: bool = False) -> PromptLayout:
        """Tokenize ``prompt``'s pieces with ``tokenizer`` (``[MASK]`` becomes its mask token); ``whole_text``
        makes :func:`tokenize_with_prompts` tokenise each filled-in template as one string."""
        check_prompt(prompt, "model.prompt")
        prefix_text, suffix_text = split_template(prompt)
        mask_token = getattr(tokenizer, "mask_token", None)
        if MASK_PLACEHOLDER in prompt and mask_token is None:
            raise ValueError(f"model.prompt: {prompt!r} has {MASK_PLACEHOLDER} but the tokenizer has no mask token")
        pieces, texts = [], []
        for text in (prefix_text, suffix_text):
            text = text.replace(MASK_PLACEHOLDER, str(mask_token)) if mask_token is not None else text
            texts.append(text)
            pieces.append(tuple(tokenizer(text, add_special_tokens=False)["input_ids"]) if text.strip() else ())
        head, tail = special_tokens_around(tokenizer)
        mask_offset = None
        if MASK_PLACEHOLDER in prompt:
            mask_id = tokenizer.mask_token_id
            part = "prefix" if MASK_PLACEHOLDER in prefix_text else "suffix"
            ids = pieces[0] if part == "prefix" else pieces[1]
            if ids.count(mask_id) != 1:
                raise ValueError(f"model.prompt: {prompt!r} does not tokenize to exactly one mask token")
            mask_offset = (part, ids.index(mask_id))
        return cls(prompt, head, pieces[0], pieces[1], tail, mask_offset, texts[0], texts[1], whole_text)

    @property
    def lead(self) -> int:
        """Tokens before the sentence (leading special tokens + prefix)."""
        return len(self.head) + len(self.prefix)

    @property
    def length(self) -> int:
        """Tokens of the prompt without a sentence (what PromptBERT calls ``template_len``)."""
        return self.lead + len(self.suffix) + len(self.tail)

    def assemble(self, sentence_ids: Sequence[int]) -> tuple[list[int], list[int]]:
        """The row's token ids around ``sentence_ids`` and its layout (see the module docstring)."""
        ids = [*self.head, *self.prefix, *sentence_ids, *self.suffix, *self.tail]
        n = len(sentence_ids)
        mask_rank = -1
        if self.mask_offset is not None:
            part, index = self.mask_offset
            mask_rank = len(self.head) + index if part == "prefix" else self.lead + n + index
        last_rank = len(ids) - len(self.tail) - 1
        return ids, [self.lead, n, len(self.suffix), mask_rank, last_rank]

    def assemble_text(self, tokenizer: Any, sentence: str) -> tuple[list[int], list[int]]:
        """The row's token ids as the filled-in template tokenised as one string (with the tokenizer's
        special tokens, stripped as scaling_sentemb strips it) and its layout.

        The sentence's tokens are those whose characters overlap the sentence (a token that merges the
        sentence's end with the suffix, like ``."``, counts as the sentence's); without a fast tokenizer's
        offsets the prefix's and suffix's piecewise counts stand in. The last prompt token is exact either way.
        """
        filled = self.prefix_text + sentence + self.suffix_text
        stripped = filled.strip()
        start = len(self.prefix_text) - (len(filled) - len(filled.lstrip()))
        end = start + len(sentence)
        try:
            encoded = tokenizer(stripped, return_offsets_mapping=True, return_special_tokens_mask=True)
        except NotImplementedError:  # a slow tokenizer has no offsets
            encoded = None
        if encoded is None:
            ids = list(tokenizer(stripped)["input_ids"])
            lead, suffix, trailing = self.lead, len(self.suffix), len(self.tail)
            n = max(len(ids) - lead - suffix - trailing, 0)
        else:
            ids = list(encoded["input_ids"])
            spans = [(a, b) for (a, b), special in
                     zip(encoded["offset_mapping"], encoded["special_tokens_mask"], strict=True) if not special]
            leading = next((i for i, special in enumerate(encoded["special_tokens_mask"]) if not special), len(ids))
            inside = [i for i, (a, b) in enumerate(spans) if a < end and b > start and b > a]
            lead_content = inside[0] if inside else sum(1 for a, _ in spans if a < start)
            lead, n = leading + lead_content, len(inside)
            suffix = len(spans) - lead_content - n
            specials = list(encoded["special_tokens_mask"])
            trailing = next((i for i, special in enumerate(reversed(specials)) if not special), len(specials))
        mask_rank = -1
        mask_id = getattr(tokenizer, "mask_token_id", None)
        if self.mask_offset is not None and mask_id is not None and mask_id in ids:
            mask_rank = ids.index(mask_id)
        return ids, [lead, n, suffix, mask_rank, len(ids) - trailing - 1]


def tokenize_with_prompts(
    tokenizer: Any,
    sentences: Sequence[str],
    layouts: Sequence[PromptLayout],
    budget: int | Sequence[int],
    pad: bool = True,
) -> dict[str, Any]:
    """Token ids of each sentence inside its prompt (``layouts[i]`` for ``sentences[i]``).

    Each sentence's own tokens are cut to ``budget`` (PromptBERT's train.py cuts the sentence, not the
    whole input, to ``max_seq_length``; a list gives each row its own budget, as SNCSE's
    train_SNCSE.py cuts the whole input). With ``pad`` the rows are padded to the longest on the
    tokenizer's padding side and returned as tensors; else as lists (for later padding).
    """
    token_ids = tokenizer(list(sentences), add_special_tokens=False)["input_ids"] if sentences else []
    budgets = [budget] * len(token_ids) if isinstance(budget, int) else list(budget)
    rows, layout_rows = [], []
    for sentence, ids, layout, cut in zip(sentences, token_ids, layouts, budgets, strict=True):
        if layout.whole_text:
            text = sentence if len(ids) <= max(cut, 0) else tokenizer.decode(ids[: max(cut, 0)])
            row, info = layout.assemble_text(tokenizer, text)
        else:
            row, info = layout.assemble(ids[: max(cut, 0)])
        rows.append(row)
        layout_rows.append(info)
    features: dict[str, Any] = {"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows]}
    if "token_type_ids" in getattr(tokenizer, "model_input_names", ()):
        features["token_type_ids"] = [[0] * len(r) for r in rows]
    if not pad:
        features["prompt_layout"] = layout_rows
        return features
    padded = dict(tokenizer.pad(features, return_tensors="pt"))
    padded["prompt_layout"] = with_offsets(layout_rows, padded["attention_mask"])
    return padded


def with_offsets(layout_rows: Sequence[Sequence[int]], attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, 6) layouts: the 5 values of :meth:`PromptLayout.assemble` and each row's first real position
    in the freshly padded ``attention_mask`` (its left padding)."""
    import torch

    rows = torch.tensor([list(r)[:5] for r in layout_rows], dtype=torch.long).reshape(-1, 5)
    first = (attention_mask != 0).long().argmax(dim=1).to(torch.long).cpu()
    return torch.cat([rows, first.unsqueeze(1)], dim=1)


def _ranks(attention_mask: torch.Tensor, layout: torch.Tensor) -> torch.Tensor:
    """(B, T) each position's rank from the row's first real token (left padding negative)."""
    import torch

    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return positions.unsqueeze(0) - layout[:, 5:6].to(attention_mask.device)


def prompt_pool_mask(attention_mask: torch.Tensor, layout: torch.Tensor) -> torch.Tensor:
    """The attention mask without the prompt's tokens: the leading special tokens and the prefix, and
    the suffix (the trailing special tokens stay, as sentence-transformers' ``include_prompt=False``)."""
    ranks = _ranks(attention_mask, layout)
    lead, n, suffix = (layout[:, i : i + 1].to(ranks.device) for i in range(3))
    keep = (ranks >= lead) & ~((ranks >= lead + n) & (ranks < lead + n + suffix))
    return attention_mask * keep.to(attention_mask.dtype)


def prompt_token_index(attention_mask: torch.Tensor, layout: torch.Tensor, pooler: str) -> torch.Tensor:
    """(B,) position of ``[MASK]`` (``pooler=mask``) or of the prompt's last token (``prompt_last``)."""
    column = 3 if pooler == "mask" else 4
    wanted = layout[:, column].to(attention_mask.device)
    if bool((wanted < 0).any()):
        raise ValueError(f"pooler={pooler}: a row's prompt has no {MASK_PLACEHOLDER}")
    return wanted + layout[:, 5].to(attention_mask.device)


def template_mask_states(backbone: Any, layout: PromptLayout, lengths: torch.Tensor) -> torch.Tensor:
    """PromptBERT's template denoising term: the last-layer ``[MASK]`` state of the template alone, one
    row per sentence length ``k`` in ``lengths``, the positions after the prefix shifted by ``k`` as if
    ``k`` sentence tokens stood in the slot (Prompt-BERT models.py ``get_delta``). Runs in the
    backbone's current mode (dropout in training, with gradients, as the official default)."""
    import torch

    if layout.mask_offset is None:
        raise ValueError(f"template denoising needs {MASK_PLACEHOLDER} in the prompt {layout.prompt!r}")
    device = next(backbone.parameters()).device
    ids, _ = layout.assemble([])
    input_ids = torch.tensor(ids, device=device).repeat(len(lengths), 1)
    positions = torch.arange(len(ids), device=device).repeat(len(lengths), 1)
    positions[:, layout.lead:] += lengths.to(device).unsqueeze(1)
    part, index = layout.mask_offset
    mask_position = len(layout.head) + index if part == "prefix" else layout.lead + index
    out = backbone(input_ids=input_ids, position_ids=positions, return_dict=True)
    return out.last_hidden_state[:, mask_position]
