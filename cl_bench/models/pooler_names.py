"""The pooler registry: ``pooler=NAME`` → the :class:`Pooler` class that pools that way, and what it reads.

Each pooler declares what it reads (the first token, earlier layers, the prompt's token, ...), which the config
checks ask before torch is imported, and pools with tensor methods on the tensors the encoder gives it: this module
imports no torch at its top. :mod:`cl_bench.models.poolers` holds the MLP head; :mod:`cl_bench.models.encoder` asks
:data:`REGISTRY` how to run the backbone and pool. A new pooler is one class here, registered with :func:`register`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import torch


class Pooler:
    """One way of pooling token states into one vector per sentence (before any MLP head).

    Attributes:
        name: the ``pooler=`` option.
        first_token: reads the first token's state ([CLS]); a decoder's first token has seen only itself.
        has_mlp: SimCSE's MLP head is applied over it (``pooler.mlp_only_train``).
        averages: a masked mean of token states (``model.include_prompt=false`` leaves the prompt's tokens out).
        reads_layers: reads hidden states of layers before the last one (the backbone returns them all).
        reads_first_layer: reads ``pooler.first_layer``.
        reads_prompt_token: reads the state at a prompt's token (the input is built with a prompt).
        appends_eos: a decoder's tokenizer appends EOS, the token it reads.
    """

    name: ClassVar[str]
    first_token: ClassVar[bool] = False
    has_mlp: ClassVar[bool] = False
    averages: ClassVar[bool] = False
    reads_layers: ClassVar[bool] = False
    reads_first_layer: ClassVar[bool] = False
    reads_prompt_token: ClassVar[bool] = False
    appends_eos: ClassVar[bool] = False

    @staticmethod
    def pool(last_hidden: torch.Tensor, attention_mask: torch.Tensor, hidden_states: Sequence[torch.Tensor] | None,
             first_layer: int, token_index: torch.Tensor | None) -> torch.Tensor:
        """(B, H) sentence vectors from the (B, T, H) last-layer states (:func:`cl_bench.models.poolers.pool`)."""
        raise TypeError("Pooler is the base class; pool with a registered pooler")


#: ``pooler=NAME`` → its class, in the order ``cl-bench list`` and the messages name them
REGISTRY: dict[str, type[Pooler]] = {}


def register(cls: type[Pooler]) -> type[Pooler]:
    """Add a pooler class to :data:`REGISTRY` under its ``name`` (a class decorator)."""
    REGISTRY[cls.name] = cls
    return cls


def masked_mean(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean over the token axis of ``hidden`` (B, T, H), ignoring positions where the mask is 0."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1e-9)


def _rows(hidden: torch.Tensor) -> Any:
    import torch  # a tensor is being pooled: torch is loaded

    return torch.arange(hidden.shape[0], device=hidden.device)


def last_token_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of the last position where ``attention_mask`` is 1, for right- and left-padded batches.

    The highest masked-in position, whatever side the padding is on (a row of zeros gives 0).
    """
    import torch

    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return (positions * (attention_mask != 0)).argmax(dim=1)  # positions are distinct: the max is the last 1


def _layers(name: str, hidden_states: Sequence[torch.Tensor] | None) -> Sequence[torch.Tensor]:
    if hidden_states is None:
        raise ValueError(f"pooler={name} needs the encoder's hidden_states")
    return hidden_states


@register
class Cls(Pooler):
    """``cls``: last-layer [CLS] followed by an MLP (Linear + tanh); in training always, at evaluation unless
    ``pooler.mlp_only_train``."""

    name = "cls"
    first_token = True
    has_mlp = True

    @staticmethod
    def pool(last_hidden, attention_mask, hidden_states, first_layer, token_index):  # noqa: ANN001, ANN205 (Pooler's)
        return last_hidden[:, 0]


@register
class ClsBeforePooler(Cls):
    """``cls_before_pooler``: the raw last-layer [CLS] vector (``cls`` without its MLP)."""

    name = "cls_before_pooler"
    has_mlp = False


@register
class Avg(Pooler):
    """``avg``: mean of the last layer over non-padding tokens."""

    name = "avg"
    averages = True

    @staticmethod
    def pool(last_hidden, attention_mask, hidden_states, first_layer, token_index):  # noqa: ANN001, ANN205
        return masked_mean(last_hidden, attention_mask)


@register
class AvgTop2(Pooler):
    """``avg_top2``: mean of the last two layers' masked means."""

    name = "avg_top2"
    averages = True
    reads_layers = True

    @staticmethod
    def pool(last_hidden, attention_mask, hidden_states, first_layer, token_index):  # noqa: ANN001, ANN205
        layers = _layers("avg_top2", hidden_states)
        return (masked_mean(layers[-2], attention_mask) + masked_mean(layers[-1], attention_mask)) / 2


@register
class AvgFirstLast(Pooler):
    """``avg_first_last``: mean of the "first" layer ``hidden_states[first_layer]`` and the last layer (``first_layer=1``
    the first transformer layer, SimCSE's code since 206d7ae; 0 the embedding output, the paper's first-last
    baselines; :mod:`cl_bench.models.poolers`)."""

    name = "avg_first_last"
    averages = True
    reads_layers = True
    reads_first_layer = True

    @staticmethod
    def pool(last_hidden, attention_mask, hidden_states, first_layer, token_index):  # noqa: ANN001, ANN205
        layers = _layers("avg_first_last", hidden_states)
        return (masked_mean(layers[first_layer], attention_mask) + masked_mean(layers[-1], attention_mask)) / 2


@register
class ClsAvg(Pooler):
    """``cls_avg``: the mean of the last layer's [CLS] state and its masked token average (AnglE's ``cls_avg``).

    As ``angle_emb.utils.get_pooling`` (SeanLee97/AnglE 5155458): ``(last[:, 0] + avg) / 2`` where ``avg`` is the
    mean of the last layer over every position the attention mask keeps, [CLS] and [SEP] included.
    """

    name = "cls_avg"
    first_token = True
    averages = True

    @staticmethod
    def pool(last_hidden, attention_mask, hidden_states, first_layer, token_index):  # noqa: ANN001, ANN205
        return (last_hidden[:, 0] + masked_mean(last_hidden, attention_mask)) / 2


class _PromptToken(Pooler):
    """A pooler reading the last-layer state at one token of the prompt (``token_index``, found by the encoder)."""

    reads_prompt_token = True

    @classmethod
    def pool(cls, last_hidden, attention_mask, hidden_states, first_layer, token_index):  # noqa: ANN001, ANN206
        if token_index is None:
            raise ValueError(f"pooler={cls.name} needs inputs built with a prompt (model.prompt)")
        return last_hidden[_rows(last_hidden), token_index]


@register
class Mask(_PromptToken):
    """``mask``: the last-layer state at the prompt's ``[MASK]`` token (PromptBERT)."""

    name = "mask"


@register
class PromptLast(_PromptToken):
    """``prompt_last``: the last-layer state at the prompt's last token (PromptEOL)."""

    name = "prompt_last"


@register
class LastToken(Pooler):
    """``last_token``: the last real token's state (decoders: the appended EOS; E5-/GTE-style decoder pooling)."""

    name = "last_token"
    appends_eos = True

    @staticmethod
    def pool(last_hidden, attention_mask, hidden_states, first_layer, token_index):  # noqa: ANN001, ANN205
        return last_hidden[_rows(last_hidden), last_token_index(attention_mask)]


POOLERS: tuple[str, ...] = tuple(REGISTRY)
#: poolers that read one token of the prompt (the input must be built with a prompt)
PROMPT_POOLERS: tuple[str, ...] = tuple(name for name, cls in REGISTRY.items() if cls.reads_prompt_token)
#: poolers that average token states (``model.include_prompt=false`` drops the prompt's tokens from them)
AVERAGING_POOLERS: tuple[str, ...] = tuple(name for name, cls in REGISTRY.items() if cls.averages)
