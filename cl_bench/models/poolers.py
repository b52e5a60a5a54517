"""The single pooler implementation, shared by training and evaluation.

Pooler names follow SimCSE's ``--pooler`` option:

* ``cls``: last-layer [CLS] followed by an MLP (Linear + tanh). In training the MLP is always
  applied; at evaluation it is applied unless ``mlp_only_train`` is set.
* ``cls_before_pooler``: the raw last-layer [CLS] vector.
* ``avg``: mean of the last layer over non-padding tokens.
* ``avg_top2``: mean of the last two layers' masked means.
* ``mask``: the last-layer state at the prompt's ``[MASK]`` token (PromptBERT; needs a prompt with
  ``[MASK]``: ``model.prompt``, default PromptBERT's template — :mod:`cl_bench.models.prompts`).
* ``prompt_last``: the last-layer state at the prompt's last token (PromptEOL; default template
  PromptEOL's ``This sentence : "[X]" means in one word:"``).
* ``avg_first_last``: mean of the "first" layer ``hidden_states[first_layer]`` and the last layer.
  ``first_layer=1`` (the default) is the first *transformer* layer, SimCSE's code since commit
  206d7ae; ``first_layer=0`` is the *embedding output*, what SimCSE's code did before it and what the
  paper's first-last baselines used (its README and issue #285). BERT-flow's "last2avg"
  (``run_siamese.py``: ``all_encoder_layers[0]`` and ``[-1]``, TF BERT's list without the embeddings)
  is ``first_layer=1``.
* ``last_token``: the last real token's state (decoders: the appended EOS, :mod:`cl_bench.models.decoders`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from cl_bench.models.pooler_names import AVERAGING_POOLERS, POOLERS, PROMPT_POOLERS  # noqa: F401 (re-exported)


def needs_hidden_states(pooler: str) -> bool:
    """Whether ``pooler`` reads layers other than the last one."""
    return pooler in ("avg_top2", "avg_first_last")


def masked_mean(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean over the token axis of ``hidden`` (B, T, H), ignoring positions where the mask is 0."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)


def pool(
    pooler: str,
    last_hidden: torch.Tensor,
    attention_mask: torch.Tensor,
    hidden_states: Sequence[torch.Tensor] | None = None,
    first_layer: int = 1,
    token_index: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pool token states into one vector per sentence (before any MLP head).

    Args:
        pooler: one of :data:`POOLERS`.
        last_hidden: (B, T, H) last-layer token states.
        attention_mask: (B, T) 1 for real tokens, 0 for padding.
        hidden_states: all layers (embeddings first), needed by ``avg_top2``/``avg_first_last``.
        first_layer: index of the "first" layer for ``avg_first_last``.
        token_index: (B,) position of the pooled token for ``mask``/``prompt_last``
            (:func:`cl_bench.models.prompts.prompt_token_index`). Averaging poolers exclude a prompt's
            tokens by receiving its pooling mask as ``attention_mask``.

    Returns:
        (B, H) sentence vectors.
    """
    if pooler in ("cls", "cls_before_pooler"):
        return last_hidden[:, 0]
    if pooler == "avg":
        return masked_mean(last_hidden, attention_mask)
    if pooler in ("avg_top2", "avg_first_last"):
        if hidden_states is None:
            raise ValueError(f"pooler={pooler} needs the encoder's hidden_states")
        other = hidden_states[-2] if pooler == "avg_top2" else hidden_states[first_layer]
        return (masked_mean(other, attention_mask) + masked_mean(hidden_states[-1], attention_mask)) / 2
    if pooler in PROMPT_POOLERS:
        if token_index is None:
            raise ValueError(f"pooler={pooler} needs inputs built with a prompt (model.prompt)")
        return last_hidden[torch.arange(last_hidden.shape[0], device=last_hidden.device), token_index]
    if pooler == "last_token":
        return last_token(last_hidden, attention_mask)
    raise ValueError(f"unknown pooler '{pooler}'; valid: {', '.join(POOLERS)}")


class MLPHead(nn.Module):
    """SimCSE's MLP over [CLS]: Linear(H, H) + tanh, freshly initialised N(0, init_std), zero bias."""

    def __init__(self, hidden_size: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        nn.init.normal_(self.dense.weight, std=init_std)
        nn.init.zeros_(self.dense.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x))


# ------------------------------------------------------------------------------------------------
# Decoder poolers (issue 26)
# ------------------------------------------------------------------------------------------------


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of the last position where ``attention_mask`` is 1, for right- and left-padded batches.

    The highest masked-in position, whatever side the padding is on (a row of zeros gives 0).
    """
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return (positions * (attention_mask != 0)).argmax(dim=1)  # positions are distinct: the max is the last 1


def last_token(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, H) state of each row's last real token (``pooler=last_token``; E5-/GTE-style decoder pooling)."""
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last_token_index(attention_mask)]
