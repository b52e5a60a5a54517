"""``eval.postprocess``: how embeddings are transformed before scoring — none, BERT-whitening or BERT-flow.

Both transforms are fitted on a task's own sentences, every split (BERT-whitening's
``normalized_by='target'``; BERT-flow's ``use_full_for_training``), so each task gets its own
transform; BERT-flow can instead be fitted once on a named corpus (``eval.flow.corpus=<file>``)
and applied to every task.

BERT-flow's official run fits the flow on embeddings computed with dropout on (``eval.flow.fit_mode=train``,
:func:`dropout_embedder`) and pools them as ``avg-last-2`` (``eval.flow.pooler=official``,
:func:`official_flow_pooling`); both need a :class:`~cl_bench.models.encoder.SentenceEncoder`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from cl_bench.eval.flow import OFFICIAL_POOLER, FittedFlow, FlowOptions
from cl_bench.eval.flow_options import check_postprocess, fits_per_task
from cl_bench.eval.geometry import Whitening
from cl_bench.models.embedding_cache import EmbeddingCache, cache_key
from cl_bench.models.inference import EncodingSettings, current_settings

log = logging.getLogger(__name__)

Transform = Callable[[np.ndarray], np.ndarray]
Embed = Callable[[Sequence[str]], np.ndarray]

@dataclass
class PostProcess:
    """A configured post-processing: :meth:`fit` gives the transform for one task's sentences.

    Attributes:
        kind: ``none`` | ``whitening`` | ``flow``.
        whitening: kept dimensions of BERT-whitening (None: all).
        flow: BERT-flow options.
    """

    kind: str = "none"
    whitening: int | None = None
    flow: FlowOptions = field(default_factory=FlowOptions)
    #: embeds the sentences a flow is fitted on (``fit_mode=train``: with dropout); None: the scored embeddings
    fit_embed: Embed | None = field(default=None, repr=False)
    _shared: Transform | None = field(default=None, repr=False)

    @property
    def fits_per_task(self) -> bool:
        """Whether each task's transform is fitted on that task's sentences (all splits needed)."""
        return fits_per_task(self.kind, self.flow)

    def prepare(self, embed: Embed, corpus: Sequence[str]) -> None:
        """Fit the one shared flow on the named corpus's sentences (no-op when fitting per task)."""
        if not self.fits_per_task and self._shared is None:
            self._shared = FittedFlow.fit(self._fitting(embed)(corpus), self.flow).transform

    def transform_for(self, embed: Embed, sentences: Sequence[str]) -> Transform:
        """The transform for a task with these sentences (all its splits): fitted on them, or the shared one."""
        if not self.fits_per_task:
            if self._shared is None:
                raise RuntimeError("PostProcess.prepare must fit the corpus flow first")
            return self._shared
        if self.kind == "whitening":
            x = np.asarray(embed(sentences))
            return Whitening.fit(x, self.whitening if self.whitening is not None else x.shape[1]).transform
        return FittedFlow.fit(np.asarray(self._fitting(embed)(sentences)), self.flow).transform

    def _fitting(self, embed: Embed) -> Embed:
        """What the flow is fitted on: the dropout embeddings (``fit_mode=train``) or the scored ones."""
        if self.kind == "flow" and self.flow.fit_mode == "train":
            if self.fit_embed is None:
                raise ValueError("eval.flow.fit_mode=train: no dropout embedder was given (dropout_embedder)")
            return self.fit_embed
        return embed


def build_postprocess(
    postprocess: str, whitening: int | None, flow: FlowOptions | Mapping[str, Any] | None
) -> PostProcess | None:
    """The :class:`PostProcess` of the ``eval`` options (None for ``none``)."""
    options = check_postprocess(postprocess, whitening, flow)
    if postprocess == "none":
        return None
    return PostProcess(postprocess, whitening, options)


def _is_sentence_encoder(encoder: Any) -> bool:
    return isinstance(encoder, torch.nn.Module) and all(
        hasattr(encoder, name) for name in ("tokenize", "pooler", "first_layer", "mlp_only_train"))


def check_flow_encoder(encoder: Any, flow: FlowOptions) -> None:
    """Raise a one-line error when ``eval.flow``'s official pooling or dropout fit cannot act on ``encoder``."""
    if _is_sentence_encoder(encoder):
        return
    for key, value, other in (("fit_mode", "train", "eval"), ("pooler", "official", "run")):
        if getattr(flow, key) == value:
            raise ValueError(f"eval.flow.{key}={value}: needs a cl-bench SentenceEncoder (got "
                             f"{type(encoder).__name__}); use eval.flow.{key}={other}")


def dropout_embedder(encoder: Any, batch_size: int, seed: int, settings: EncodingSettings | None = None) -> Embed:
    """Embeddings computed with ``encoder`` in training mode (dropout on), as BERT-flow fits its flow.

    The official ``get_embedding(bert_config, is_training=True)`` runs BERT with its dropout (0.1)
    while the flow is trained; cl-bench scores dropout-free embeddings, so only the fit sees these.
    Torch, fp32; truncation as the evaluation's (the model's limit); the SimCSE MLP applies as at
    evaluation (``mlp_only_train``). The masks are drawn from ``seed`` (torch's generator reseeded at
    each call), so the same encoder, sentences, batch size and seed give the same embeddings: with
    the evaluation's embedding cache on (``eval.cache``), they are stored under a key of all of these
    and the dropout probabilities, and a later run reads them instead of encoding again. ``settings``:
    the evaluation's encoding settings (only their cache options act); None: those current at each call.
    """

    def embed(sentences: Sequence[str]) -> np.ndarray:
        sentences = list(sentences)
        # the fits run after the evaluation's encoding context has closed: its settings are passed in
        options = settings or current_settings()
        cache = EmbeddingCache(options.folder(), options.cache_size_gb) if options.cache and sentences else None
        key = cache_key(_dropout_identity(encoder, batch_size, seed), sentences) if cache else ""
        cached = cache.load(key, len(sentences)) if cache else None
        if cached is not None:
            log.info("BERT-flow: dropout embeddings of %d sentences from the embedding cache (%s)", len(sentences), key[:12])
            return cached
        out = _dropout_embeddings(sentences)
        if cache:
            cache.store(key, out)
        return out

    def _dropout_embeddings(sentences: list[str]) -> np.ndarray:
        out = np.empty((len(sentences), encoder.hidden_size), dtype=np.float32)
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))  # less padding
        was_training = encoder.training
        cuda = [encoder.device.index or 0] if encoder.device.type == "cuda" else []
        with torch.no_grad(), torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            encoder.train()
            try:
                for start in range(0, len(order), batch_size):
                    idx = order[start : start + batch_size]
                    features = encoder.tokenize([sentences[i] for i in idx], None)
                    features = {key: value.to(encoder.device) for key, value in features.items()}
                    vectors = encoder(features, apply_mlp=not encoder.mlp_only_train)
                    out[idx] = vectors.float().cpu().numpy()
            finally:
                encoder.train(was_training)
        return out

    return embed


def _dropout_identity(encoder: Any, batch_size: int, seed: int) -> dict[str, Any]:
    """What :func:`dropout_embedder`'s output depends on besides the sentences (the cache key's identity).

    The encoder's own cache identity (weights, class, pooling, tokenizer, length limit) for torch fp32,
    plus what the masks depend on: the seed, the batches (size; order: sentence length in characters),
    every dropout probability (the modules' and the backbone config's, e.g. attention dropout), the
    device type (CPU and CUDA generators draw different masks) and the torch version.
    """
    config = getattr(getattr(encoder, "backbone", None), "config", None)
    rates = {k: v for k, v in (config.to_dict() if config is not None else {}).items() if "dropout" in k}
    return {
        **encoder.cache_identity("torch", "fp32"),
        "dropout_fit": {"seed": seed, "batch_size": batch_size, "order": "characters",
                        "modules": [m.p for m in encoder.modules() if isinstance(m, torch.nn.Dropout)],
                        "config": rates, "device": encoder.device.type, "torch": torch.__version__},
    }


@contextlib.contextmanager
def official_flow_pooling(encoder: Any, flow: FlowOptions) -> Iterator[None]:
    """Pool as BERT-flow's official run (``avg-last-2``) inside the block when ``eval.flow.pooler=official``.

    ``run_siamese.py`` ``avg-last-2`` averages ``all_encoder_layers[0]`` and ``[-1]``: TF BERT's list
    has no embedding output, so the first *transformer* layer (hidden_states[1]) and the last.
    """
    if flow.pooler != "official":
        yield
        return
    saved = encoder.pooler, encoder.first_layer
    encoder.pooler, encoder.first_layer = OFFICIAL_POOLER
    try:
        yield
    finally:
        encoder.pooler, encoder.first_layer = saved
