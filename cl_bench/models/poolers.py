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
* ``cls_avg``: the mean of the last layer's [CLS] state and its masked token average ([CLS] included; AnglE's
  ``cls_avg``).
* ``last_token``: the last real token's state (decoders: the appended EOS, :mod:`cl_bench.models.decoders`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from cl_bench.models.pooler_names import (  # noqa: F401 (the names and helpers the models and methods import from here)
    AVERAGING_POOLERS,
    POOLERS,
    PROMPT_POOLERS,
    REGISTRY,
    Pooler,
    last_token_index,
    masked_mean,
)


def needs_hidden_states(pooler: str) -> bool:
    """Whether ``pooler`` reads layers other than the last one (an encoder subclass's own pooling, e.g. IS-BERT's
    ``is_bert_cnn_mean``, is no registered pooler: it reads the last layer)."""
    return REGISTRY.get(pooler, Pooler).reads_layers


def pool(
    pooler: str,
    last_hidden: torch.Tensor,
    attention_mask: torch.Tensor,
    hidden_states: Sequence[torch.Tensor] | None = None,
    first_layer: int = 1,
    token_index: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pool token states into one vector per sentence (before any MLP head), with the registered pooler
    (:data:`cl_bench.models.pooler_names.REGISTRY`).

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
    if pooler not in REGISTRY:
        raise ValueError(f"unknown pooler '{pooler}'; valid: {', '.join(POOLERS)}")
    return REGISTRY[pooler].pool(last_hidden, attention_mask, hidden_states, first_layer, token_index)


class MLPHead(nn.Module):
    """SimCSE's MLP over [CLS]: Linear(H, H) + tanh, freshly initialised N(0, init_std), zero bias."""

    def __init__(self, hidden_size: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        nn.init.normal_(self.dense.weight, std=init_std)
        nn.init.zeros_(self.dense.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x))
