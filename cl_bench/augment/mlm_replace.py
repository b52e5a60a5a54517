"""MLM-based word replacement: SimCSE Table 1's "MLM 15%" (a masked LM replaces 15% of the words).

The chosen words are each replaced by one mask token; the masked LM predicts all masks of a
sentence in one forward pass, and each word is replaced by a token sampled from the softmax over
its ``top_k`` most likely vocabulary entries, excluding the original word, special tokens and
word-piece continuations (as nlpaug's ``ContextualWordEmbsAug`` substitutes, top_k = 100).

The masked LM is a frozen copy of the encoder's own checkpoint with its pretrained MLM head
(``mlm_model: null``), or any other masked LM. A frozen copy rather than the training encoder:
the replacements then come from the pretrained LM, as in SimCSE, and not from a backbone whose
MLM head drifts out of tune while it trains.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from cl_bench.augment.base import Augmentation
from cl_bench.augment.specs import MLMReplaceSpec
from cl_bench.augment.words import rounded_count, split_affixes, split_words
from cl_bench.models.hub import ModelLoadError, check_model_reachable


class MLMHeadMissing(ValueError):
    """The checkpoint has no trained MLM head; the message names the key to set."""


def load_masked_lm(name_or_path: str, device: torch.device | str = "cpu") -> tuple[Any, Any]:
    """Load a masked LM and its tokenizer, frozen in eval mode.

    Raises:
        MLMHeadMissing: when the checkpoint's MLM head weights are absent (they would be random).
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer


    check_model_reachable(name_or_path)
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(name_or_path, output_loading_info=True)
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    except OSError as err:
        raise ModelLoadError(f"augmentation.mlm_model: cannot load '{name_or_path}': {err}") from err
    base = model.base_model_prefix
    head_missing = sorted(key for key in info.get("missing_keys", []) if not key.startswith(f"{base}."))
    if head_missing:
        raise MLMHeadMissing(
            f"augmentation.mlm_model: '{name_or_path}' has no trained MLM head (missing {head_missing[0]}); "
            "set augmentation.mlm_model to a masked LM such as bert-base-uncased"
        )
    if tokenizer.mask_token_id is None:
        raise MLMHeadMissing(f"augmentation.mlm_model: the tokenizer of '{name_or_path}' has no mask token")
    model.eval().requires_grad_(False)
    return model.to(device), tokenizer


class MLMReplace(Augmentation):
    """Replace ``round(probability * l)`` words (at least one) by masked-LM predictions.

    Keys: declared on its spec (:class:`~cl_bench.augment.specs.MLMReplaceSpec`).
    """

    spec: MLMReplaceSpec

    def __init__(self, spec: MLMReplaceSpec) -> None:
        super().__init__(spec)
        self.model: Any = None
        self.tokenizer: Any = None
        self._encoder: Any = None
        self._allowed: torch.Tensor | None = None

    def setup(self, encoder: Any, model_name_or_path: str) -> None:
        """Load the masked LM (the encoder's checkpoint unless ``mlm_model`` is set)."""
        self._encoder = encoder
        self.model, self.tokenizer = load_masked_lm(self.spec.mlm_model or model_name_or_path)
        self._allowed = self._replacement_vocabulary()
        if not self._allowed.any():
            raise MLMHeadMissing(
                f"augmentation.mlm_model: '{self.spec.mlm_model or model_name_or_path}' has no whole-word tokens to predict"
            )

    def _replacement_vocabulary(self) -> torch.Tensor:
        """(V,) bool: tokens that can stand for a whole word (no specials, no ``##`` pieces, no punctuation)."""
        tokenizer = self.tokenizer
        size = self.model.get_output_embeddings().weight.shape[0]
        special = set(tokenizer.all_special_ids)
        allowed = torch.zeros(size, dtype=torch.bool)
        for token_id, token in enumerate(
            tokenizer.convert_ids_to_tokens(list(range(min(size, len(tokenizer)))))
        ):
            if token_id in special or token is None or token.startswith("##"):
                continue
            # A whole word, not punctuation: a replacement must itself be a word.
            allowed[token_id] = any(ch.isalnum() for ch in tokenizer.convert_tokens_to_string([token]))
        return allowed

    def _device(self) -> torch.device:
        # The training loop moves the encoder after setup(): follow it.
        device = getattr(self._encoder, "device", torch.device("cpu"))
        if next(self.model.parameters()).device != device:
            self.model.to(device)
        return device

    def augment_text(self, sentences: Sequence[str], rng: random.Random) -> list[str]:
        """One view per sentence; deterministic given ``rng``'s state."""
        if self.model is None:
            raise RuntimeError("augmentation=mlm_replace: setup(encoder, model_name_or_path) was not called")
        out: list[str] = []
        for start in range(0, len(sentences), self.spec.batch_size):
            out.extend(self._augment_batch(list(sentences[start : start + self.spec.batch_size]), rng))
        return out

    def _augment_batch(self, sentences: list[str], rng: random.Random) -> list[str]:
        tokenizer, mask = self.tokenizer, self.tokenizer.mask_token
        plans: list[tuple[list[str], list[int]]] = []
        masked_texts = []
        for sentence in sentences:
            words = split_words(sentence)
            candidates = [i for i, word in enumerate(words) if split_affixes(word)[1]]
            count = (
                min(len(candidates), max(1, rounded_count(self.spec.probability, len(words)))) if candidates else 0
            )
            chosen = sorted(rng.sample(candidates, count))
            masked = [
                split_affixes(w)[0] + mask + split_affixes(w)[2] if i in chosen else w
                for i, w in enumerate(words)
            ]
            plans.append((words, chosen))
            masked_texts.append(" ".join(masked))
        device = self._device()
        max_length = min(int(getattr(tokenizer, "model_max_length", 512)), 512)
        batch = tokenizer(
            masked_texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            logits = self.model(**{k: v.to(device) for k, v in batch.items()}).logits
        generator = torch.Generator().manual_seed(rng.getrandbits(63))
        out = []
        for row, (words, chosen) in enumerate(plans):
            positions = (batch["input_ids"][row] == tokenizer.mask_token_id).nonzero().squeeze(1)
            new_words = list(words)
            # Truncation may drop the last masks of a very long sentence: those words stay as they are.
            for word_index, position in zip(
                chosen, positions.tolist(), strict=False
            ):  # truncation may drop masks
                prefix, core, suffix = split_affixes(words[word_index])
                replacement = self._sample_word(logits[row, position].float().cpu(), core, generator)
                new_words[word_index] = prefix + replacement + suffix
            out.append(" ".join(new_words))
        return out

    def _sample_word(self, logits: torch.Tensor, original: str, generator: torch.Generator) -> str:
        allowed = self._allowed.clone()
        original_ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(original))
        if len(original_ids) == 1:
            allowed[original_ids[0]] = False
        scores = logits[: allowed.shape[0]].masked_fill(~allowed, float("-inf"))
        top = torch.topk(scores, min(self.spec.top_k, int(allowed.sum())))
        choice = torch.multinomial(torch.softmax(top.values, dim=0), 1, generator=generator).item()
        token = self.tokenizer.convert_ids_to_tokens(int(top.indices[choice]))
        return self.tokenizer.convert_tokens_to_string([token]).strip()
