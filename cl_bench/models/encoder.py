"""Loading a Hugging Face backbone and wrapping it as a sentence encoder.

:class:`SentenceEncoder` is what training methods optimise and what evaluation scores: one
backbone, one pooler (:mod:`cl_bench.models.poolers`) and an optional SimCSE MLP head. It is
saved in Hugging Face format (the MLP head goes into the backbone's own pooler slot, as SimCSE's
``simcse_to_huggingface.py`` does), plus a small ``cl_bench_encoder.json`` naming the pooler.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import queue
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from cl_bench.models.decoders import (
    BackboneOptions,
    apply_lora,
    is_decoder,
    is_lora_dir,
    is_peft,
    load_lora,
    prepare_tokenizer,
    set_bidirectional,
)
from cl_bench.models.embedding_cache import (
    EmbeddingCache,
    cache_key,
    respect_umask,
    sentences_digest,
    state_digest,
    tokenizer_digest,
)
from cl_bench.models.hub import (
    ENCODER_CLASSES,
    ModelLoadError,
    check_model_reachable,
    hub_hint,
    is_local_path,
    recorded_encoder_class,
)
from cl_bench.models.inference import (
    AUTO_SUBDIR,
    EncodingSettings,
    backend_that_repays,
    check_inference_options,
    current_settings,
    matmul_precision,
    measured_auto_choice,
    model_shape,
    remembered_probe,
    resolve_backend,
    resolve_precision,
    time_backends,
)
from cl_bench.models.onnx_backend import discard_export, export_path, export_seconds, onnx_backbone
from cl_bench.models.pooler_names import REGISTRY, Pooler
from cl_bench.models.poolers import MLPHead, needs_hidden_states, pool
from cl_bench.models.prompts import (
    DEFAULT_TEMPLATES,
    PromptLayout,
    prompt_pool_mask,
    prompt_token_index,
    tokenize_with_prompts,
    with_offsets,
    with_period,
)
from cl_bench.utils import interrupt
from cl_bench.utils.rundir import ENCODER_META_FILE

log = logging.getLogger(__name__)
#: config attribute names that hold dropout rates (hidden, then attention), across BERT/RoBERTa/DistilBERT/MPNet families
DROPOUT_KEYS = ("hidden_dropout_prob", "dropout", "attention_probs_dropout_prob", "attention_dropout")


def quiet_transformers_bars() -> None:
    """No "Loading weights" / "Writing model shards" bars at every load and best-checkpoint save.

    transformers' own progress bars only; the hub's download bars (a first-use fetch) stay. Older
    transformers without ``set_tqdm_hook`` draw no such bars.
    """
    from transformers.utils import logging as transformers_logging

    set_hook = getattr(transformers_logging, "set_tqdm_hook", None)
    if set_hook is not None:
        set_hook(lambda factory, args, kwargs: factory(*args, **{**kwargs, "disable": True}))


#: the compiled training forward pass of an encoder's backbone (``train.compile``; cl_bench/train/compile.py),
#: kept outside the module so that a deep copy of an encoder (momentum encoders) runs its own backbone eagerly
_COMPILED_BACKBONES: weakref.WeakKeyDictionary[nn.Module, Callable[..., Any]] = weakref.WeakKeyDictionary()


def attention_bias(attention_mask: torch.Tensor, config: Any) -> torch.Tensor:
    """The 2D padding mask as the 4D mask BERT-family attention takes as it is (``(B, 1, 1, L)``: keys only).

    transformers' own mask builder asks ``padding_mask.all()`` on the host (to drop the mask when nothing is
    padded), a device synchronisation in every forward pass; a 4D mask is passed through untouched. SDPA
    takes it as booleans (True: attend), eager attention as an additive bias (0 or the dtype's minimum), the
    values transformers builds. Other implementations (flash attention) and decoders keep the 2D mask.
    """
    implementation = getattr(config, "_attn_implementation", None)
    if is_decoder(config) or implementation not in ("sdpa", "eager") or attention_mask.ndim != 2:
        return attention_mask
    keep = attention_mask[:, None, None, :].bool()
    if implementation == "sdpa":
        return keep
    return torch.zeros(keep.shape, device=keep.device).masked_fill_(~keep, torch.finfo(torch.float32).min)


def apply_dropout(config: Any, dropout: float | None) -> None:
    """Set hidden and attention dropout of a transformers config to ``dropout`` (None keeps it)."""
    if dropout is None:
        return
    for key in DROPOUT_KEYS:
        if hasattr(config, key):
            setattr(config, key, float(dropout))


def load_backbone(
    name_or_path: str, dropout: float | None = None, options: BackboneOptions | None = None, append_eos: bool = False
) -> tuple[nn.Module, Any]:
    """Load an ``AutoModel`` and its tokenizer, with dropout and the backbone ``options`` applied.

    A decoder's tokenizer gets its pad token, right padding and, with ``append_eos``, an EOS closing
    each sentence (:func:`cl_bench.models.decoders.prepare_tokenizer`). A LoRA adapter folder loads
    its base model with the adapters; ``options.lora_r > 0`` wraps a fresh backbone with new ones.

    Raises:
        ModelLoadError: with a hint to use local files when the hub cannot be reached.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    options = options or BackboneOptions()
    check_model_reachable(name_or_path)
    quiet_transformers_bars()
    kwargs: dict[str, Any] = {}
    if options.attn_implementation is not None:
        kwargs["attn_implementation"] = options.attn_implementation
    try:
        config = AutoConfig.from_pretrained(name_or_path)
        apply_dropout(config, dropout)
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        if is_lora_dir(name_or_path):
            backbone = load_lora(name_or_path, kwargs)
            apply_dropout(backbone.config, dropout)
        else:
            backbone = AutoModel.from_pretrained(name_or_path, config=config, **kwargs)
    except OSError as err:
        if is_local_path(name_or_path):
            raise ModelLoadError(f"model.name_or_path: cannot load '{name_or_path}': {err}") from err
        raise ModelLoadError(hub_hint(name_or_path)) from err
    if is_decoder(backbone.config):
        try:
            prepare_tokenizer(tokenizer, append_eos)
        except RuntimeError as err:
            raise ModelLoadError(f"model.name_or_path: '{name_or_path}': {err}") from err
        if options.bidirectional or getattr(backbone.config, "is_causal", True) is False:
            set_bidirectional(backbone)  # asked, or saved so (config.json's is_causal) by a bidirectional run
    if options.gradient_checkpointing:
        # non-reentrant: checkpointed segments get gradients even when the inputs need none (LoRA: frozen embeddings)
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if options.lora_r > 0:
        if is_lora_dir(name_or_path):
            raise ModelLoadError(f"model.lora.r: '{name_or_path}' holds LoRA adapters already; train from its base model")
        backbone = apply_lora(backbone, options.lora_r, options.lora_alpha, options.lora_dropout,
                              options.lora_target_modules)
    return backbone, tokenizer


#: The vectors of the latest iterating encodes (``eval.sample_pairs`` set) by sentence, for the one identity
#: (:meth:`SentenceEncoder.cache_identity`: weights bit for bit, backend, precision, pooling) they were encoded with.
_RECENT_VECTORS: dict[str, dict[str, np.ndarray]] = {}
#: at most this many sentences kept (the dev sample and the final evaluation's: about 2,400 with eval=iterate)
RECENT_VECTORS_MAX = 20_000


def _remember_vectors(identity: str, sentences: Sequence[str], vectors: np.ndarray) -> None:
    """Keep ``vectors`` (rows of ``sentences``) for ``identity``, forgetting those of any other identity."""
    kept = _RECENT_VECTORS.get(identity, {})
    _RECENT_VECTORS.clear()
    if len(kept) + len(sentences) <= RECENT_VECTORS_MAX:
        kept.update(zip(sentences, np.array(vectors, dtype=np.float32, copy=True), strict=True))
        _RECENT_VECTORS[identity] = kept


#: Tokenised sentence lists kept in the process (the dev sets of in-training evaluations and of a sweep's jobs, issue 37).
TOKEN_MEMO_ENTRIES = 8
_TOKEN_MEMO: OrderedDict[tuple, Any] = OrderedDict()

#: Padded tokens per batch on a GPU, per sentence of ``eval.batch_size`` (128 sentences -> 8,192 tokens).
GPU_TOKENS_PER_SENTENCE = 64


def token_batches(order: Sequence[int], lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Consecutive batches of ``order`` (sentence indices sorted by length) sized by padded tokens: each holds
    as many sentences as fit ``batch_size * GPU_TOKENS_PER_SENTENCE`` tokens once padded to its longest
    (at least ``batch_size`` sentences, at most 8x that), so short sentences share larger batches."""
    budget = batch_size * GPU_TOKENS_PER_SENTENCE
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        fits = (len(current) + 1) * lengths[index] <= budget or len(current) < batch_size  # sorted: the longest
        if current and (not fits or len(current) >= 8 * batch_size):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def prefetched(items: Sequence[Any], prepare: Callable[[Any], Any], background: bool) -> Iterator[tuple[Any, Any]]:
    """``(item, prepare(item))`` for each item; with ``background``, ``prepare`` runs one item ahead on a thread
    (the next batch is padded while the device computes the current one)."""
    if not background:
        for item in items:
            yield item, prepare(item)
        return
    ready: queue.Queue[tuple[Any, Any, BaseException | None]] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def work() -> None:
        for item in items:
            if stop.is_set():
                return
            try:
                ready.put((item, prepare(item), None))
            except BaseException as error:  # noqa: BLE001 (re-raised in the consumer)
                ready.put((item, None, error))
                return

    thread = threading.Thread(target=work, name="cl-bench-pad", daemon=True)
    thread.start()
    try:
        for _ in items:
            item, prepared, error = ready.get()
            if error is not None:
                raise error
            yield item, prepared
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue
            try:
                ready.get_nowait()
            except queue.Empty:
                thread.join(0.01)


class SentenceEncoder(nn.Module):
    """Backbone + pooler (+ SimCSE MLP head): text in, one vector per sentence out.

    Args:
        backbone: a Hugging Face encoder (``AutoModel``).
        tokenizer: its tokenizer.
        pooler: a name from :data:`cl_bench.models.poolers.POOLERS`.
        mlp: the MLP head used by ``cls`` (None for other poolers).
        mlp_only_train: apply the MLP in training only (SimCSE's ``--mlp_only_train``).
        max_length: truncation length for training batches.
        first_layer: hidden-state index used as the "first" layer by ``avg_first_last``.
        prompt: a prefix or ``[X]`` template around every sentence, in training and evaluation
            (:mod:`cl_bench.models.prompts`); "" for none (a prompt pooler then uses its default template).
        include_prompt: False drops the prompt's tokens from the averaging poolers.
        prompt_period: a rule of :data:`cl_bench.models.prompts.PeriodRule`.
    """

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer: Any,
        pooler: str = "cls",
        mlp: nn.Module | None = None,
        mlp_only_train: bool = False,
        max_length: int = 32,
        first_layer: int = 1,
        prompt: str = "",
        include_prompt: bool = True,
        prompt_period: str = "none",
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooler = pooler
        self.mlp = mlp
        self.mlp_only_train = mlp_only_train
        self.max_length = max_length
        self.first_layer = first_layer
        self.prompt = prompt or DEFAULT_TEMPLATES.get(pooler, "")
        self.include_prompt = include_prompt
        self.prompt_period = prompt_period
        #: per-view prompts (``model.view_prompts``): view ``g`` of a method's groups gets entry ``min(g, len-1)``
        self.view_prompts: list[str] = []
        #: pass the padding mask to the backbone in 4D (:func:`attention_bias`): no host read in the forward
        #: pass (the training step on CUDA sets it; cl_bench/train/step.py)
        self.host_free_mask = False
        self._layouts: dict[str, PromptLayout] = {}

    @property
    def compiled_backbone(self) -> Callable[..., Any] | None:
        """The backbone's forward compiled for training (``train.compile``), or None: used in training mode only."""
        return _COMPILED_BACKBONES.get(self)

    @compiled_backbone.setter
    def compiled_backbone(self, forward: Callable[..., Any] | None) -> None:
        if forward is None:
            _COMPILED_BACKBONES.pop(self, None)
        else:
            _COMPILED_BACKBONES[self] = forward

    def prompt_layout(self, prompt: str) -> PromptLayout:
        """``prompt`` tokenized into its pieces (once per prompt and pooler kind); ``pooler=prompt_last``
        tokenises each filled-in template as one string, as PromptEOL (:mod:`cl_bench.models.prompts`)."""
        whole_text = self.pooler == "prompt_last"
        key = f"{int(whole_text)}{prompt}"
        if key not in self._layouts:
            self._layouts[key] = PromptLayout.build(self.tokenizer, prompt, whole_text=whole_text)
        return self._layouts[key]

    def view_prompt(self, group: int) -> str:
        """The prompt of a method's view/column ``group`` (``model.view_prompts``, else ``model.prompt``)."""
        if not self.view_prompts:
            return self.prompt
        return self.view_prompts[min(group, len(self.view_prompts) - 1)]

    @property
    def hidden_size(self) -> int:
        """Width of the pooled sentence vector."""
        return int(self.backbone.config.hidden_size)

    @property
    def model_max_length(self) -> int:
        """Longest input the model takes: tokenizer limit, position table (RoBERTa: minus its offset), 512."""
        positions = int(getattr(self.backbone.config, "max_position_embeddings", 512))
        positions -= int(getattr(self.backbone.config, "pad_token_id", 0) or 0) + 1 if "roberta" in str(
            getattr(self.backbone.config, "model_type", "")) else 0
        return min(int(getattr(self.tokenizer, "model_max_length", 512)), positions, 512)

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def tokenize(
        self, sentences: Sequence[str], max_length: int | None = -1, prompts: Sequence[str] | None = None
    ) -> dict[str, torch.Tensor]:
        """Tokenize with padding to the batch maximum (training inputs).

        ``max_length=-1`` uses the training length; ``None`` truncates only at the model's limit
        (SentEval evaluation applies no length cut). ``prompts`` (one per sentence; default
        ``model.prompt`` for all) wrap each sentence: the sentence's own tokens are then cut to
        ``max_length`` (at the model's limit: what the prompt leaves), and ``prompt_layout`` is added.
        """
        prompts = list(prompts) if prompts is not None else [self.prompt] * len(sentences)
        if any(prompts):
            layouts = [self.prompt_layout(p) for p in prompts]
            if max_length == -1:
                budget = self.max_length
            elif max_length is None:
                budget = self.model_max_length - max(layout.length for layout in layouts)
            else:
                budget = max_length
            texts = [with_period(s, self.prompt_period, training=True) for s in sentences]
            return tokenize_with_prompts(self.tokenizer, texts, layouts, budget)
        if max_length == -1:
            max_length = self.max_length
        if max_length is None:
            max_length = self.model_max_length
        return dict(
            self.tokenizer(
                list(sentences), padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            )
        )

    def token_states(self, features: dict[str, torch.Tensor], inputs_embeds: torch.Tensor | None = None):
        """Run the backbone; returns its output (with hidden_states when the pooler needs them)."""
        kwargs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask")}
        if self.host_free_mask and "attention_mask" in kwargs:
            kwargs["attention_mask"] = attention_bias(kwargs["attention_mask"], self.backbone.config)
        if "token_type_ids" in features and self._takes_token_types():
            kwargs["token_type_ids"] = features["token_type_ids"]
        if inputs_embeds is not None:
            kwargs.pop("input_ids", None)
            kwargs["inputs_embeds"] = inputs_embeds
        compiled = self.compiled_backbone if self.training else None
        backbone = self.backbone if compiled is None else compiled
        return backbone(**kwargs, output_hidden_states=needs_hidden_states(self.pooler), return_dict=True)

    def pool_outputs(
        self,
        outputs: Any,
        attention_mask: torch.Tensor,
        apply_mlp: bool | None = None,
        prompt_layout: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Pool backbone outputs into sentence vectors, applying the MLP head where due.

        ``prompt_layout`` (from :meth:`tokenize` with a prompt) locates the prompt pooler's token and,
        with ``include_prompt`` false, the prompt's tokens that the averaging poolers leave out.
        """
        token_index = None
        kind = REGISTRY.get(self.pooler, Pooler)  # a subclass's own pooling (IS-BERT's) is no registered pooler
        if prompt_layout is not None:
            if kind.reads_prompt_token:
                token_index = prompt_token_index(attention_mask, prompt_layout, self.pooler)
            elif kind.averages and not self.include_prompt:
                attention_mask = prompt_pool_mask(attention_mask, prompt_layout)
        vectors = pool(
            self.pooler,
            outputs.last_hidden_state,
            attention_mask,
            getattr(outputs, "hidden_states", None),
            self.first_layer,
            token_index=token_index,
        )
        if apply_mlp is None:
            apply_mlp = self.training or not self.mlp_only_train
        if kind.has_mlp and self.mlp is not None and apply_mlp:
            vectors = self.mlp(vectors)
        return vectors

    def _takes_token_types(self) -> bool:
        """Whether the backbone's forward has ``token_type_ids`` (BERT does; Llama, Qwen2 do not)."""
        if not hasattr(self, "_token_types"):
            model = self.backbone.get_base_model() if is_peft(self.backbone) else self.backbone
            self._token_types = "token_type_ids" in inspect.signature(model.forward).parameters
        return self._token_types

    @property
    def onnx_capable(self) -> bool:
        """Whether the ONNX backend applies: not to decoders nor LoRA-wrapped backbones (torch runs them)."""
        return not (is_decoder(self.backbone.config) or is_peft(self.backbone))

    def forward(
        self,
        features: dict[str, torch.Tensor],
        inputs_embeds: torch.Tensor | None = None,
        apply_mlp: bool | None = None,
    ) -> torch.Tensor:
        """Embed a tokenized batch: (B, T) features -> (B, H) vectors."""
        outputs = self.token_states(features, inputs_embeds)
        if "prompt_layout" in features:  # prompted inputs (a subclass's own pooling may not take the keyword)
            return self.pool_outputs(outputs, features["attention_mask"], apply_mlp, prompt_layout=features["prompt_layout"])
        return self.pool_outputs(outputs, features["attention_mask"], apply_mlp)

    def cache_identity(self, backend: str, precision: str) -> dict[str, Any]:
        """Everything this encoder's embeddings depend on, for the embedding cache's key.

        Every parameter and buffer (bit for bit, including the MLP head and any subclass module),
        the class, the pooling options, the tokenizer, the length limit, the backend and the precision.
        """
        return {
            "encoder_class": _class_path(type(self)),
            "weights": state_digest(self),
            "tokenizer": tokenizer_digest(self.tokenizer),
            "pooler": self.pooler,
            "first_layer": self.first_layer,
            "mlp": self.mlp is not None and not self.mlp_only_train,
            "max_length": self.model_max_length,
            **self._prompt_meta(),
            # prompt_last tokenises the filled-in template as one string since issue 40: older cache entries differ
            **({"prompt_tokenization": "whole_text"} if self.prompt and self.pooler == "prompt_last" else {}),
            "backend": backend,
            "precision": precision,
        }

    @torch.inference_mode()
    def encode(self, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
        """Embed sentences for evaluation (eval mode, no truncation below the model limit).

        Each distinct sentence is encoded once, in length-sorted batches, under inference mode, with
        the backend, precision and cache of the current :func:`cl_bench.models.inference.encoding`
        context (outside one: torch, fp32, no cache). Returns float32 (N, H) in the input order.
        """
        settings = current_settings()
        unique = list(dict.fromkeys(sentences))
        backend = self._backend(settings, unique, batch_size)
        precision = resolve_precision(settings.precision, self.device, backend, settings.iterating)
        settings.backends_used.add(backend)
        settings.precisions_used.add(precision)
        # a one-sentence encode (a probe, a check) is no news at INFO
        log.log(logging.INFO if len(unique) > 1 else logging.DEBUG,
                "encoding %d sentences: backend=%s%s, precision=%s%s, cache=%s", len(unique), backend,
                 " (auto)" if settings.backend == "auto" else "", precision,
                 " (auto)" if settings.precision == "auto" else "", "on" if settings.cache else "off")
        cache, key = self._cache_entry(unique, backend, settings)
        vectors = cache.load(key, len(unique)) if cache else None
        # iterating: the vectors this process last encoded with the same weights and settings (the last dev
        # evaluation's sample, which the final evaluation scores again) are taken as they are
        identity = json.dumps(self.cache_identity(backend, precision), sort_keys=True, default=str) \
            if settings.iterating and unique else None
        if vectors is not None:
            log.info("embedding cache hit: %d sentences (%s)", len(unique), key[:12])
        else:
            vectors = self._encode_reusing(unique, batch_size, backend, settings, identity)
            if cache:
                cache.store(key, vectors)
        if identity is not None:
            _remember_vectors(identity, unique, vectors)
        position = {s: i for i, s in enumerate(unique)}
        return vectors[[position[s] for s in sentences]]

    @torch.inference_mode()  # resolving ``auto`` may time both backends (forward passes)
    def cached(self, sentences: Sequence[str], batch_size: int = 128) -> bool:
        """Whether :meth:`encode` would serve ``sentences`` from the embedding cache (current context).

        It resolves the backend as :meth:`encode` does (``auto`` measures once per machine, on these sentences).
        """
        settings = current_settings()
        unique = list(dict.fromkeys(sentences))
        cache, key = self._cache_entry(unique, self._backend(settings, unique, batch_size), settings)
        return cache is not None and cache.contains(key)

    def token_counts(self, sentences: Sequence[str]) -> list[int]:
        """Tokens of each sentence as :meth:`encode` feeds it (what its length-sorted batches sort by)."""
        return [len(ids) for ids in self._token_ids(sentences)["input_ids"]] if sentences else []

    def _token_ids(self, sentences: Sequence[str]) -> Any:
        """Token ids of the sentences, truncated at the model's limit only (no padding); inside
        ``model.prompt`` (its evaluation period rule applied) when there is one.

        The last :data:`TOKEN_MEMO_ENTRIES` lists are kept in the process: an in-training dev evaluation
        tokenises its dev sets once, not at every evaluation, and the next job of a sweep in the same process
        (another encoder with an identical tokenizer) reuses them; the key holds everything the ids depend on
        (the tokenizer's full definition, the prompt settings, the length limit, the sentences)."""
        # the tokenizer's digest, computed again when the tokenizer or its size changes (a method adding tokens)
        identity = (id(self.tokenizer), len(self.tokenizer))
        if self.__dict__.get("_tokenizer_identity") != identity:
            self.__dict__["_tokenizer_digest"] = tokenizer_digest(self.tokenizer)
            self.__dict__["_tokenizer_identity"] = identity
        key = (self.__dict__["_tokenizer_digest"], sentences_digest(sentences), self.prompt, self.prompt_period,
               self.model_max_length)
        if key in _TOKEN_MEMO:
            _TOKEN_MEMO.move_to_end(key)
            return _TOKEN_MEMO[key]
        _TOKEN_MEMO[key] = self._tokenize_unpadded(sentences)
        while len(_TOKEN_MEMO) > TOKEN_MEMO_ENTRIES:
            _TOKEN_MEMO.popitem(last=False)
        return _TOKEN_MEMO[key]

    def _tokenize_unpadded(self, sentences: Sequence[str]) -> Any:
        """:meth:`_token_ids` without the memo."""
        if self.prompt:
            layout = self.prompt_layout(self.prompt)
            texts = [with_period(s, self.prompt_period, training=False) for s in sentences]
            return tokenize_with_prompts(self.tokenizer, texts, [layout] * len(texts),
                                         self.model_max_length - layout.length, pad=False)
        return self.tokenizer(list(sentences), truncation=True, max_length=self.model_max_length)

    def _prompt_meta(self) -> dict[str, Any]:
        """The prompt settings that change embeddings (for the cache key and the saved metadata)."""
        if not self.prompt:
            return {}
        return {"prompt": self.prompt, "include_prompt": self.include_prompt, "prompt_period": self.prompt_period}

    def _backend(self, settings: EncodingSettings, unique: list[str], batch_size: int) -> str:
        """The backend that encodes ``unique`` under ``settings`` on this encoder's device (checked)."""
        precision = resolve_precision(settings.precision, self.device, iterating=settings.iterating)
        backend = resolve_backend(settings.backend, precision, self.device)
        if settings.backend == "auto" and not self.onnx_capable:
            backend = "torch"  # no ONNX export for decoders and LoRA backbones: auto means torch
        elif backend == "onnx" and not self.onnx_capable:
            raise ValueError("eval.backend: onnx is not exported for decoders or LoRA models; use eval.backend=torch or auto")
        check_inference_options(backend, settings.precision, self.device)
        if settings.backend == "auto" and backend == "onnx" and unique:
            backend = self._auto_backend(unique, settings, batch_size)
        return backend

    def _cache_entry(
        self, unique: list[str], backend: str, settings: EncodingSettings
    ) -> tuple[EmbeddingCache | None, str]:
        """The embedding cache and the key of ``unique``'s entry (None, "" when caching is off)."""
        if not (settings.cache and unique):
            return None, ""
        cache = EmbeddingCache(settings.folder(), settings.cache_size_gb)
        precision = resolve_precision(settings.precision, self.device, backend, settings.iterating)
        return cache, cache_key(self.cache_identity(backend, precision), unique)

    #: the GPU batching of :meth:`encode` (token-sized batches, padding on a thread, vectors kept on the device):
    #: None = on CUDA devices only; True/False force it (the tests run it on the CPU)
    device_side_batches: bool | None = None

    #: sentences of the ``auto`` probe (spread over the lengths of the sentences being encoded)
    AUTO_PROBE_SENTENCES = 256

    def _auto_backend(self, unique: list[str], settings: EncodingSettings, batch_size: int) -> str:
        """torch or ONNX Runtime for ``unique``: ONNX Runtime where it measured faster with identical embeddings on this
        machine (:func:`cl_bench.models.inference.measured_auto_choice`, once per machine and model shape) and its
        gain on these sentences exceeds the export this checkpoint still needs
        (:func:`cl_bench.models.inference.backend_that_repays`)."""
        config = getattr(self.backbone, "config", None)
        # dropout is off at evaluation, a checkpoint's folder is no shape: one probe per machine and model shape
        shape = model_shape(config.to_dict() if config is not None else {})
        architecture = "|".join((
            type(self.backbone).__name__, json.dumps(shape, sort_keys=True, default=str),
            str(needs_hidden_states(self.pooler)),
        ))
        if not remembered_probe(architecture, settings.folder()) and len(unique) < self.AUTO_PROBE_SENTENCES:
            # the probe alone encodes more than this call, and exports: it cannot repay here (it runs for a larger one)
            log.info("eval.backend=auto: torch for %d sentences (fewer than the probe's %d: not worth an export)",
                     len(unique), self.AUTO_PROBE_SENTENCES)
            return "torch"
        step = max(1, len(unique) // self.AUTO_PROBE_SENTENCES)
        probe = sorted(unique, key=len)[::step][: self.AUTO_PROBE_SENTENCES]
        path = export_path(self.backbone, self.tokenizer, settings.folder())
        made: list[Path] = []

        def measure() -> dict[str, float]:
            log.info("eval.backend=auto: timing torch and ONNX Runtime on %d sentences (once per machine and model "
                     "shape; remembered in %s)", len(probe), Path(settings.folder()) / AUTO_SUBDIR)
            made.extend([] if path.is_file() else [path])
            export = export_seconds(self.backbone, self.tokenizer, settings.folder())
            timings = time_backends(lambda backend: self._encode_distinct(probe, batch_size, backend, settings))
            return {**timings, "export_seconds": export}

        measured = measured_auto_choice(architecture, settings.folder(), measure)
        choice = backend_that_repays(measured, len(unique), exported=path.is_file())
        if choice != "onnx":
            for made_path in made:  # the probe's export is not kept when ONNX Runtime does not run
                discard_export(made_path)
        return choice

    def _encode_reusing(
        self, unique: list[str], batch_size: int, backend: str, settings: EncodingSettings, identity: str | None
    ) -> np.ndarray:
        """:meth:`_encode_distinct` of the sentences :data:`_RECENT_VECTORS` does not hold for ``identity``."""
        known = _RECENT_VECTORS.get(identity) if identity is not None else None
        if not known:
            return self._encode_distinct(unique, batch_size, backend, settings)
        missing = [text for text in unique if text not in known]
        log.info("reusing %d of %d sentences encoded earlier in this process with the same weights and settings "
                 "(iterating)", len(unique) - len(missing), len(unique))
        fresh = self._encode_distinct(missing, batch_size, backend, settings) if missing else None
        rows = {text: row for row, text in enumerate(missing)}
        return np.stack([known[text] if fresh is None or text not in rows else fresh[rows[text]] for text in unique])

    def _encode_distinct(
        self, unique: list[str], batch_size: int, backend: str, settings: EncodingSettings
    ) -> np.ndarray:
        """(len(unique), H) float32 embeddings of distinct sentences with ``backend``."""
        was_training = self.training
        self.eval()
        # Tokenize once (the same truncation as tokenize(..., None)); each batch only pads stored ids:
        # tokenizing again per batch cost ~13% of the STS suite's CPU time with all-MiniLM-L6-v2.
        tokens = self._token_ids(unique) if unique else {}
        # sort by token count, not characters: on the 7 STS tasks this cuts the padded tokens by 30%
        lengths = [len(ids) for ids in tokens["input_ids"]] if unique else []
        order = sorted(range(len(unique)), key=lambda i: lengths[i])
        device = self.device
        onnx = onnx_backbone(self.backbone, self.tokenizer, settings.folder()) if backend == "onnx" and unique else None
        device_side = self.device_side_batches if self.device_side_batches is not None else device.type == "cuda"
        on_gpu = device_side and onnx is None
        pin = on_gpu and device.type == "cuda"
        # on a GPU, batches sized by tokens (short sentences in larger batches: fewer launches) and the
        # vectors kept on the device until the end (no host sync per batch, so padding the next batch on
        # the host overlaps the forward pass); on a CPU, batch_size sentences as before (same figures)
        batches = token_batches(order, lengths, batch_size) if on_gpu else \
            [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        out_device = torch.empty((len(unique), self.hidden_size), dtype=torch.float32, device=device) if on_gpu else None
        out = np.empty((len(unique), self.hidden_size), dtype=np.float32)
        # eval.precision=auto resolved here: fp32 on a CPU, bf16 on a CUDA GPU with bf16 units
        precision = resolve_precision(settings.precision, device, backend, settings.iterating)

        def padded(idx: list[int]) -> tuple[Any, torch.Tensor | None]:
            batch = self.tokenizer.pad({key: [tokens[key][i] for i in idx] for key in tokens if key != "prompt_layout"},
                                       return_tensors="pt")
            if not on_gpu:
                return batch, None
            positions = torch.tensor(idx)
            if not pin:
                return batch, positions
            # pinned host memory: the copies below do not wait for the device to finish the previous batch
            return {key: value.pin_memory() for key, value in batch.items()}, positions.pin_memory()

        # one precision context around the whole batch loop, not one per batch: autocast drops its cache of
        # bf16 weight copies whenever the outermost autocast block exits, so a per-batch block re-cast every
        # weight matrix on every batch (issue 37: bf16 evaluation measured slower than fp32 on an H200)
        # ... and for bf16, grad mode off instead of inference mode: under torch.inference_mode autocast caches
        # no weight copy at all (torch 2.11/2.13: every linear re-casts its weight on every call), under no_grad
        # it keeps one per weight for the block (tests/eval/test_eval_precision_auto.py counts the casts)
        cast_once = precision == "bf16" and onnx is None
        with torch.inference_mode(False) if cast_once else contextlib.nullcontext(), \
                torch.no_grad() if cast_once else contextlib.nullcontext(), matmul_precision(precision, device):
            if out_device is not None and cast_once:  # written to outside inference mode: a normal tensor
                out_device = torch.empty((len(unique), self.hidden_size), dtype=torch.float32, device=device)
            out = self._encode_batches(batches, padded, on_gpu, pin, tokens, onnx, out, out_device)
        if out_device is not None:
            out = out_device.cpu().numpy()
        self.train(was_training)
        return out

    def _encode_batches(
        self, batches: list[list[int]], padded: Callable[[list[int]], tuple[Any, torch.Tensor | None]], on_gpu: bool,
        pin: bool, tokens: Any, onnx: Any, out: np.ndarray, out_device: torch.Tensor | None,
    ) -> np.ndarray:
        """Run :meth:`_encode_distinct`'s batches (inside its precision context); vectors go to ``out_device``
        (GPU) or ``out`` (host), which is returned."""
        device = self.device
        for idx, (batch, positions) in prefetched(batches, padded, background=on_gpu):
            interrupt.check()  # a first Ctrl-C/SIGTERM during an evaluation stops here
            features = {key: value.to(device, non_blocking=pin) for key, value in batch.items()}
            if "prompt_layout" in tokens:
                rows = [tokens["prompt_layout"][i] for i in idx]
                features["prompt_layout"] = with_offsets(rows, batch["attention_mask"]).to(device)
            if onnx is not None:
                outputs = onnx(batch, needs_hidden_states(self.pooler))
                outputs.last_hidden_state = outputs.last_hidden_state.to(device)
                if outputs.hidden_states is not None:
                    outputs.hidden_states = tuple(h.to(device) for h in outputs.hidden_states)
                layout = {"prompt_layout": features["prompt_layout"]} if "prompt_layout" in features else {}
                vectors = self.pool_outputs(outputs, features["attention_mask"], **layout)
            else:
                vectors = self(features)
            if out_device is not None and positions is not None:
                out_device[positions.to(device, non_blocking=pin)] = vectors.float()
            else:
                out[idx] = vectors.float().cpu().numpy()
        return out

    @classmethod
    def from_saved(cls, base: SentenceEncoder, model_dir: Path) -> SentenceEncoder:
        """Rebuild an encoder saved by this class around ``base``'s backbone and tokenizer.

        Subclasses with modules of their own (IS-BERT's CNN) override it to load them from
        ``model_dir``; the plain encoder is ``base`` itself.
        """
        return base

    def save(self, out_dir: str | Path, extra_meta: dict[str, Any] | None = None) -> None:
        """Save in Hugging Face format; the MLP head goes into the backbone's pooler slot."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        backbone_pooler = getattr(self.backbone, "pooler", None)
        if self.mlp is not None and backbone_pooler is not None and hasattr(backbone_pooler, "dense"):
            backbone_pooler.dense.load_state_dict(self.mlp.dense.state_dict())
        if is_peft(self.backbone):
            self._save_lora(out_dir)
        else:
            self.backbone.save_pretrained(out_dir)
        self.tokenizer.save_pretrained(out_dir)
        meta = {
            "encoder_class": type(self).__name__,  # a name of cl-bench's registry (cl_bench.models.hub.ENCODER_CLASSES)
            "pooler": self.pooler,
            "mlp_only_train": self.mlp_only_train,
            "first_layer": self.first_layer,
            "max_length": self.max_length,
            **self._prompt_meta(),
            **(extra_meta or {}),
        }
        (out_dir / ENCODER_META_FILE).write_text(json.dumps(meta, indent=2))

        respect_umask(out_dir)  # model.safetensors is written 0600 by transformers

    def _save_lora(self, out_dir: Path) -> None:
        """LoRA: the adapters only (peft format), the base config as trained (dropout, ``is_causal``) and
        the base model's location as an absolute path when it is a local folder (runs start anywhere)."""
        self.backbone.save_pretrained(out_dir)
        base = self.backbone.get_base_model()
        base.config.save_pretrained(out_dir)
        adapter_config = out_dir / "adapter_config.json"
        values = json.loads(adapter_config.read_text())
        base_path = str(values.get("base_model_name_or_path") or base.config.name_or_path)
        if is_local_path(base_path):
            values["base_model_name_or_path"] = str(Path(base_path).expanduser().resolve())
        adapter_config.write_text(json.dumps(values, indent=2))


def special_tokens_mask(tokenizer: Any, input_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) bool mask of special tokens ([CLS], [SEP], [PAD] …) in ``input_ids``."""
    rows = [tokenizer.get_special_tokens_mask(ids, already_has_special_tokens=True) for ids in input_ids.tolist()]
    return torch.tensor(rows, dtype=torch.bool, device=input_ids.device)


def build_encoder(
    name_or_path: str,
    pooler: str = "cls",
    dropout: float | None = None,
    max_length: int = 32,
    mlp_only_train: bool = False,
    first_layer: int = 1,
    fresh_mlp: bool = True,
    prompt: str = "",
    include_prompt: bool = True,
    prompt_period: str = "none",
    view_prompts: Sequence[str] = (),
    options: BackboneOptions | None = None,
) -> SentenceEncoder:
    """Build a :class:`SentenceEncoder` from a hub id or local directory.

    For ``pooler=cls``: with ``fresh_mlp`` (training) the MLP is newly initialised as in SimCSE;
    otherwise (evaluation) the backbone's own pooler is used as the MLP, which is what SimCSE's
    evaluation reads as ``pooler_output`` and where :meth:`SentenceEncoder.save` stores a trained head.

    For evaluation (``fresh_mlp=False``), a folder saved by a :class:`SentenceEncoder` subclass
    (``encoder_class`` in ``cl_bench_encoder.json``, e.g. IS-BERT's CNN encoder) is rebuilt as that
    class, whose own pooling replaces ``pooler``: scoring its backbone alone would be another model.

    ``options`` (:class:`cl_bench.models.decoders.BackboneOptions`): bidirectional attention, attention
    kernel, gradient checkpointing, LoRA. A decoder with ``pooler=last_token`` gets EOS appended.
    """
    if pooler not in REGISTRY:
        raise ValueError(f"unknown pooler '{pooler}'; valid: {', '.join(REGISTRY)}")
    backbone, tokenizer = load_backbone(name_or_path, dropout, options, append_eos=REGISTRY[pooler].appends_eos)
    saved_class = None if fresh_mlp else _saved_encoder_class(name_or_path)
    if saved_class is not None:
        log.info("%s was saved by %s: rebuilding it (its pooling replaces pooler=%s)",
                 name_or_path, saved_class.__qualname__, pooler)
        base = SentenceEncoder(backbone, tokenizer, "avg", None, False, max_length, first_layer)
        return saved_class.from_saved(base, Path(name_or_path))
    mlp: nn.Module | None = None
    if REGISTRY[pooler].has_mlp:
        hidden = int(backbone.config.hidden_size)
        mlp = MLPHead(hidden, float(getattr(backbone.config, "initializer_range", 0.02)))
        backbone_pooler = getattr(backbone, "pooler", None)
        if not fresh_mlp:
            if backbone_pooler is None or not hasattr(backbone_pooler, "dense"):
                raise ModelLoadError(
                    f"pooler=cls: '{name_or_path}' has no pooler layer; use pooler=cls_before_pooler"
                )
            mlp.dense.load_state_dict(backbone_pooler.dense.state_dict())
    encoder = SentenceEncoder(backbone, tokenizer, pooler, mlp, mlp_only_train, max_length, first_layer,
                              prompt, include_prompt, prompt_period)
    encoder.view_prompts = list(view_prompts)
    return encoder


def encoder_from_config(model: Any, pooler: Any, training: bool) -> SentenceEncoder:
    """The run's encoder from its ``model`` and ``pooler`` config nodes: the one route from a config to an encoder
    (training builds it here, ``mode=eval`` too).

    Args:
        model: the ``model`` node (``name_or_path``, ``dropout``, ``max_length``, the prompt keys, the backbone options).
        pooler: the ``pooler`` node (``name``, ``mlp_only_train``, ``first_layer``).
        training: a fresh MLP for ``pooler=cls``, the model's dropout, training length, view prompts, LoRA and
            gradient checkpointing; else (evaluation) the encoder as saved: the checkpoint's own pooler layer as
            the MLP, its dropout, no truncation below the model's limit (:func:`build_encoder`).
    """
    common: dict[str, Any] = {
        "pooler": str(pooler.name), "mlp_only_train": bool(pooler.mlp_only_train), "first_layer": int(pooler.first_layer),
        "prompt": str(model.prompt), "include_prompt": bool(model.include_prompt),
        "prompt_period": str(model.prompt_period), "options": BackboneOptions.from_config(model, training=training),
    }
    if not training:
        return build_encoder(str(model.name_or_path), fresh_mlp=False, **common)
    return build_encoder(str(model.name_or_path), dropout=model.dropout, max_length=int(model.max_length), fresh_mlp=True,
                         view_prompts=[str(p) for p in model.view_prompts], **common)


def _class_path(cls: type) -> str:
    """``module.QualName``: the class in the embedding cache's key."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _saved_encoder_class(name_or_path: str) -> type[SentenceEncoder] | None:
    """The :class:`SentenceEncoder` subclass that saved a local folder, or None (plain encoder, hub id): an entry of
    cl-bench's registry (:data:`cl_bench.models.hub.ENCODER_CLASSES`) chosen by the name the folder records, never a
    module the folder names."""
    import importlib

    name = recorded_encoder_class(Path(name_or_path)) if Path(name_or_path).is_dir() else None
    if name is None or name == SentenceEncoder.__name__:
        return None
    # cl-bench's own module for the name (models/ imports no method module by statement: the layers)
    encoder_class = getattr(importlib.import_module(ENCODER_CLASSES[name]), name)
    if not (isinstance(encoder_class, type) and issubclass(encoder_class, SentenceEncoder)):
        raise ModelLoadError(f"{ENCODER_CLASSES[name]}.{name} is not a SentenceEncoder")
    return encoder_class
