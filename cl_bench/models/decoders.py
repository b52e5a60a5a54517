"""Decoder language models (Llama, Mistral, Qwen2, GPT-2, ...) and the backbone options of issue 26.

What each family needs to be used as a sentence encoder, decided from its config and tokenizer, not
from a list of names:

* **decoder or encoder**: a ``model_type`` that has a causal-LM head class and no masked-LM head class
  in transformers' auto mappings is a decoder (Llama, Mistral, Qwen2, GPT-2, Gemma, Phi ...); BERT,
  RoBERTa, MPNet, DistilBERT have masked-LM heads and attend both ways already.
* **pad token**: decoders usually have none (Llama, Mistral, GPT-2); their EOS token pads (masked out).
* **padding side**: right. Decoders number positions from the first token regardless of padding, so a
  left-padded sentence would get other position ids in every batch; on the right its tokens never
  see the padding (causal attention) and :func:`~cl_bench.models.poolers.last_token_index` finds its end.
* **appended EOS** (``pooler=last_token``): none of these families' tokenizers end a sentence with
  EOS (Llama/Mistral prepend BOS only; Qwen2 and GPT-2 add nothing). E5-mistral and GTE-Qwen2 append
  it and pool its state; the tokenizer's post-processor is set to do so, so the saved tokenizer
  (and a sentence-transformers export) does the same.

The backbone options (``model.bidirectional``, ``model.attn_implementation``,
``model.gradient_checkpointing``, ``model.lora.*``) are checked by :func:`check_backbone_options`
from the model's config alone, before any weights load, and applied by :func:`cl_bench.models.encoder.load_backbone`.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from cl_bench.models.pooler_names import REGISTRY

log = logging.getLogger(__name__)

ATTN_IMPLEMENTATIONS: tuple[str, ...] = ("eager", "sdpa", "flash_attention_2")
#: a LoRA checkpoint (adapters only) is a folder with this file (peft's name)
ADAPTER_CONFIG = "adapter_config.json"
#: poolers that read position 0, which a causal decoder's first token cannot fill with the sentence
FIRST_TOKEN_POOLERS: tuple[str, ...] = tuple(name for name, cls in REGISTRY.items() if cls.first_token)


class BackboneOptionError(ValueError):
    """A model option that cannot act on this backbone; the one-line message names the key."""


def is_lora_dir(name_or_path: str | Path) -> bool:
    """True for a folder of LoRA adapters saved by peft (what cl-bench saves as best_model with LoRA)."""
    return (Path(name_or_path).expanduser() / ADAPTER_CONFIG).is_file()


def adapter_base(name_or_path: str | Path) -> str:
    """The base model a LoRA adapter folder was trained on (``base_model_name_or_path`` of its config)."""
    return str(json.loads((Path(name_or_path).expanduser() / ADAPTER_CONFIG).read_text())["base_model_name_or_path"])


def load_config(name_or_path: str) -> Any:
    """The transformers config of a model folder, hub id or LoRA adapter folder (its base model's)."""
    from transformers import AutoConfig

    if is_lora_dir(name_or_path):
        return AutoConfig.from_pretrained(str(Path(name_or_path).expanduser()))  # the base config saved beside it
    return AutoConfig.from_pretrained(name_or_path)


def is_decoder(config: Any) -> bool:
    """True for a decoder-only language model (causal-LM head class, no masked-LM head class)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    model_type = str(getattr(config, "model_type", ""))
    return model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def backbone_class(config: Any) -> type | None:
    """The ``AutoModel`` class of ``config`` (None when transformers has none)."""
    from transformers import AutoModel

    try:
        return AutoModel._model_mapping[type(config)]  # noqa: SLF001 - the class, without building a model
    except KeyError:
        return None


def can_be_bidirectional(config: Any) -> bool:
    """Whether the family's attention mask follows ``config.is_causal`` (transformers' ``create_causal_mask``
    turns it into a bidirectional mask when ``is_causal`` is false)."""
    cls = backbone_class(config)
    if cls is None:
        return False
    try:
        from transformers import masking_utils
    except ImportError:  # transformers < 4.53 builds masks in each model's code
        return False
    if "is_causal" not in inspect.getsource(masking_utils.create_causal_mask):  # the fallback is newer than the module
        return False
    source = inspect.getsource(inspect.getmodule(cls))
    return "create_causal_mask(" in source or "create_causal_mask if" in source


def flash_attention_available() -> str | None:
    """None when flash_attention_2 can run here, else why not."""
    import torch

    if importlib.util.find_spec("flash_attn") is None:
        return "the flash_attn package is not installed (pip install flash-attn)"
    if not torch.cuda.is_available():
        return "it needs a CUDA GPU and none is visible"
    return None


def check_backbone_options(model: Any, mode: str, pooler: str, method: Any = None, augmentation: Any = None,
                           eval_backend: str = "auto", keeps_mlp: bool = False) -> None:
    """Reject, from the model's config alone (no weights loaded), an option the backbone cannot do.

    Args:
        model: the ``model`` config node (``name_or_path``, ``bidirectional``, ``attn_implementation``,
            ``gradient_checkpointing``, ``lora``).
        mode: ``train`` or ``eval``.
        pooler: ``pooler.name``.
        method: the run's method spec (its ``mlm_weight``, :attr:`~cl_bench.specs.MethodSpec.needs_masked_lm`), None in mode=eval.
        augmentation: the augmentation class the method uses (None if none).
        eval_backend: ``eval.backend``.
        keeps_mlp: ``pooler=cls`` with its MLP kept at evaluation (``mlp_only_train=false``).

    Raises:
        BackboneOptionError: one line naming the key.
    """
    name = str(model.name_or_path)
    try:
        config = load_config(name)
    except (OSError, ValueError) as err:
        raise BackboneOptionError(f"model.name_or_path: cannot read the config of '{name}': {err}".replace("\n", " ")) from err
    decoder = is_decoder(config)
    kind = f"'{name}' ({config.model_type})"
    lora_r = int(model.lora.r) if mode == "train" else 0
    if decoder and pooler in FIRST_TOKEN_POOLERS:
        raise BackboneOptionError(
            f"pooler={pooler}: {kind} is a decoder: its first token has seen only itself (causal attention); "
            "use pooler=last_token or pooler=avg")
    if model.bidirectional:
        if not decoder:
            raise BackboneOptionError(f"model.bidirectional: {kind} is not a decoder: it attends both ways already")
        if not can_be_bidirectional(config):
            raise BackboneOptionError(
                f"model.bidirectional: the installed transformers builds {config.model_type}'s attention mask without "
                "create_causal_mask, so its causal mask cannot be replaced")
        if (why := window_rejection(config)) is not None:
            raise BackboneOptionError(f"model.bidirectional: {why}")
    impl = model.attn_implementation
    if impl is not None:
        if impl not in ATTN_IMPLEMENTATIONS:
            raise BackboneOptionError(f"model.attn_implementation: unknown '{impl}'; valid: {', '.join(ATTN_IMPLEMENTATIONS)}")
        cls = backbone_class(config)
        supported = {"eager": True, "sdpa": getattr(cls, "_supports_sdpa", False),
                     "flash_attention_2": getattr(cls, "_supports_flash_attn", getattr(cls, "_supports_flash_attn_2", False))}
        if not supported[impl]:
            raise BackboneOptionError(f"model.attn_implementation: {kind} has no {impl} attention in the installed transformers")
        if impl == "flash_attention_2" and (why := flash_attention_available()) is not None:
            raise BackboneOptionError(f"model.attn_implementation: flash_attention_2 cannot run here: {why}")
    if mode == "train" and model.gradient_checkpointing:
        cls = backbone_class(config)
        if not getattr(cls, "supports_gradient_checkpointing", False):
            raise BackboneOptionError(f"model.gradient_checkpointing: {kind} does not support gradient checkpointing")
    if lora_r > 0:
        _check_lora(model.lora, config, kind)
        if keeps_mlp:
            raise BackboneOptionError(
                "model.lora.r: pooler=cls with pooler.mlp_only_train=false keeps an MLP head that the saved LoRA "
                "adapters do not hold; set pooler.mlp_only_train=true or use another pooler")
        if is_lora_dir(name):
            raise BackboneOptionError(f"model.lora.r: '{name}' holds LoRA adapters already; train from its base model")
    if (decoder or lora_r > 0 or is_lora_dir(name)) and eval_backend == "onnx":
        what = "a decoder" if decoder else "a LoRA model"
        raise BackboneOptionError(f"eval.backend: onnx is not exported for {what} ({kind}); use eval.backend=torch or auto")
    if decoder and mode == "train":
        _check_method_on_decoder(method, augmentation, kind)


def _check_lora(lora: Any, config: Any, kind: str) -> None:
    """LoRA's values, and target modules peft can find for this family."""
    if importlib.util.find_spec("peft") is None:
        raise BackboneOptionError("model.lora.r: LoRA needs the peft package (pip install 'peft>=0.17,<1')")
    if lora.target_modules is None:
        from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as defaults

        if not defaults.get(config.model_type):
            raise BackboneOptionError(
                f"model.lora.target_modules: peft has no default target modules for {kind}; name them, "
                "e.g. model.lora.target_modules=[all-linear]")


def _check_method_on_decoder(method: Any, augmentation: Any, kind: str) -> None:
    """Methods/augmentations that need what only BERT-shaped encoders have (``method``: the run's
    :class:`cl_bench.specs.MethodSpec`, whose :attr:`~cl_bench.specs.MethodSpec.needs_masked_lm` says what)."""
    if method is not None and float(getattr(method, "mlm_weight", 0.0) or 0.0) > 0:
        raise BackboneOptionError(
            f"method.mlm_weight: {kind} is a decoder and has no masked-LM head for the MLM term; set method.mlm_weight=0")
    if method is not None and method.needs_masked_lm:  # DiffCSE's generator, PromptBERT's and SNCSE's [MASK]
        raise BackboneOptionError(f"method={method.name}: {method.needs_masked_lm}, which decoder {kind} has not")
    if augmentation is not None:
        aug_name = getattr(augmentation, "name", None) or augmentation.__name__
        if getattr(augmentation, "embedding_level", False):
            raise BackboneOptionError(
                f"augmentation={aug_name}: cutoff edits BERT's `embeddings` module output, which decoder {kind} has not; "
                "use a text-level augmentation or dropout")
        if "mlm" in str(augmentation.__module__).rsplit(".", 1)[-1]:
            raise BackboneOptionError(
                f"augmentation={aug_name}: it samples replacements from a masked LM, which decoder {kind} is not; "
                "use another augmentation")


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------
def prepare_tokenizer(tokenizer: Any, append_eos: bool) -> None:
    """A decoder's tokenizer made fit for batched sentence encoding (in place): a pad token (EOS where it
    has none), right padding, and with ``append_eos`` an EOS token closing every sentence.

    Raises:
        RuntimeError: the tokenizer has no EOS token, or would not append it.
    """
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None and tokenizer.unk_token is None:
            raise RuntimeError("the tokenizer has neither a pad, an EOS nor an UNK token to pad with")
        tokenizer.pad_token = tokenizer.eos_token if tokenizer.eos_token is not None else tokenizer.unk_token
    tokenizer.padding_side = "right"
    if not append_eos or _ends_with_eos(tokenizer):
        return
    if tokenizer.eos_token is None:
        raise RuntimeError("pooler=last_token: the tokenizer has no EOS token to append")
    prefix = _prefix_ids(tokenizer)  # what the family puts in front (Llama/Mistral: BOS): kept
    if hasattr(tokenizer, "add_eos_token") and hasattr(tokenizer, "add_bos_token"):
        # Llama-style tokenizers rebuild their post-processor from these flags (also when loaded again)
        tokenizer.add_bos_token = tokenizer.bos_token_id is not None and prefix == [tokenizer.bos_token_id]
        tokenizer.add_eos_token = True
    if not (_ends_with_eos(tokenizer) and _prefix_ids(tokenizer)[: len(prefix)] == prefix):
        _append_eos_post_processor(tokenizer, prefix)
    if not (_ends_with_eos(tokenizer) and _prefix_ids(tokenizer)[: len(prefix)] == prefix):
        raise RuntimeError(f"pooler=last_token: cannot make the {type(tokenizer).__name__} tokenizer append its EOS token")


def _prefix_ids(tokenizer: Any) -> list[int]:
    """The ids the tokenizer adds before a sentence (what it puts around an empty one, minus a final EOS)."""
    ids = list(tokenizer("", add_special_tokens=True)["input_ids"])
    return ids[:-1] if ids and ids[-1] == tokenizer.eos_token_id else ids


def _ends_with_eos(tokenizer: Any) -> bool:
    ids = tokenizer("a b")["input_ids"]
    return tokenizer.eos_token_id is not None and len(ids) > 0 and ids[-1] == tokenizer.eos_token_id


def _append_eos_post_processor(tokenizer: Any, prefix_ids: list[int]) -> None:
    """Set a ``tokenizers`` post-processor that keeps the tokens the tokenizer adds in front (e.g. BOS) and
    appends EOS; saved in tokenizer.json, so every later load appends it too."""
    from tokenizers import processors

    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if backend is None:
        raise RuntimeError(f"pooler=last_token: {type(tokenizer).__name__} is not a fast tokenizer; cannot append EOS")
    prefix = [tokenizer.convert_ids_to_tokens(i) for i in prefix_ids]
    eos = tokenizer.eos_token
    specials = {t: tokenizer.convert_tokens_to_ids(t) for t in [*prefix, eos]}
    single = " ".join([*prefix, "$A", eos])
    pair = " ".join([*prefix, "$A", eos, "$B:1", f"{eos}:1"])
    backend.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=list(specials.items()))


#: the layer-type names transformers gives sliding-window and full-attention layers (``config.layer_types``)
SLIDING_LAYER, FULL_LAYER = "sliding_attention", "full_attention"


def set_bidirectional(backbone: nn.Module) -> None:
    """Replace the decoder's causal mask by a full bidirectional one (LLM2Vec's first step).

    ``config.is_causal = False`` makes transformers' ``create_causal_mask`` build a bidirectional mask
    (with padding) instead, and is saved in config.json, so the saved model, ``AutoModel`` and a
    sentence-transformers export attend both ways too; attention modules' own ``is_causal`` flags
    (read by flash-attention kernels) are switched off as well.

    A sliding-window family (Mistral, Qwen2 with ``use_sliding_window``) would otherwise get a
    bidirectional mask *within the window* (``create_sliding_window_causal_mask`` with ``is_causal``
    false); LLM2Vec's bidirectional models build one full mask for every layer (``_prepare_4d_attention_mask``,
    no window). So the window is switched off too: ``config.sliding_window = None``, sliding layers typed as
    full-attention layers (``config.layer_types``), and the modules' own copies of both (saved in config.json
    as well). :func:`window_rejection` refuses families whose sliding layers differ in more than the mask.
    """
    config = backbone.config
    config.is_causal = False
    if getattr(config, "sliding_window", None) is not None:
        config.sliding_window = None
    if getattr(config, "use_sliding_window", False):
        config.use_sliding_window = False
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, list | tuple) and SLIDING_LAYER in layer_types:
        config.layer_types = [FULL_LAYER if t == SLIDING_LAYER else t for t in layer_types]
    for module in backbone.modules():
        if module is not backbone and isinstance(getattr(module, "is_causal", None), bool):
            module.is_causal = False
        if isinstance(getattr(module, "sliding_window", None), int):
            module.sliding_window = None
        for attribute in ("layer_type", "attention_type"):
            if getattr(module, attribute, None) == SLIDING_LAYER:
                setattr(module, attribute, FULL_LAYER)
        if getattr(module, "has_sliding_layers", False) is True:
            module.has_sliding_layers = False


def window_rejection(config: Any) -> str | None:
    """Why :func:`set_bidirectional` cannot make ``config``'s family attend fully, or None.

    Families whose sliding-window layers also have a rotary embedding of their own (Gemma 3's local
    layers: ``rope_local_base_freq`` or per-layer-type rope parameters) would change more than the mask
    when typed as full layers; they are refused rather than half converted."""
    layer_types = getattr(config, "layer_types", None) or ()
    if SLIDING_LAYER not in layer_types:
        return None
    rope = getattr(config, "rope_parameters", None)
    if getattr(config, "rope_local_base_freq", None) is not None or (isinstance(rope, dict) and SLIDING_LAYER in rope):
        return (f"{config.model_type}'s sliding-window layers have a rotary embedding of their own; full bidirectional "
                "attention (LLM2Vec's) would change it too")
    return None


def apply_lora(backbone: nn.Module, r: int, alpha: float, dropout: float, target_modules: list[str] | None) -> nn.Module:
    """Wrap ``backbone`` with peft LoRA adapters: the base weights are frozen, the adapters train."""
    from peft import LoraConfig, get_peft_model

    targets: Any = list(target_modules) if target_modules is not None else None
    if targets == ["all-linear"]:
        targets = "all-linear"  # peft's keyword for every linear layer (LLM2Vec's choice)
    config = LoraConfig(r=int(r), lora_alpha=float(alpha), lora_dropout=float(dropout), target_modules=targets)
    return get_peft_model(backbone, config)


def load_lora(adapter_dir: str | Path, backbone_kwargs: dict[str, Any]) -> nn.Module:
    """A base model with the trained LoRA adapters of ``adapter_dir`` (unmerged, frozen).

    The folder holds the adapters, the tokenizer and the base model's config.json as trained (dropout,
    ``is_causal``); the base weights come from the adapters' ``base_model_name_or_path``.
    """
    from peft import PeftModel
    from transformers import AutoConfig, AutoModel

    adapter_dir = Path(adapter_dir).expanduser()
    config = AutoConfig.from_pretrained(str(adapter_dir))
    base = AutoModel.from_pretrained(adapter_base(adapter_dir), config=config, **backbone_kwargs)
    return PeftModel.from_pretrained(base, str(adapter_dir))


@dataclass
class BackboneOptions:
    """The ``model.*`` options that change how the backbone is built (defaults: as the checkpoint is)."""

    bidirectional: bool = False
    attn_implementation: str | None = None
    gradient_checkpointing: bool = False
    lora_r: int = 0
    lora_alpha: float = 32.0
    lora_dropout: float = 0.05
    lora_target_modules: list[str] | None = None

    @classmethod
    def from_config(cls, model: Any, training: bool) -> BackboneOptions:
        """From the ``model`` spec (:class:`cl_bench.run_specs.ModelConfig`, or its config node); LoRA and gradient
        checkpointing only when ``training``."""
        lora, targets = model.lora, model.lora.target_modules
        return cls(
            bidirectional=bool(model.bidirectional),
            attn_implementation=model.attn_implementation,
            gradient_checkpointing=bool(model.gradient_checkpointing) and training,
            lora_r=int(lora.r or 0) if training else 0,
            lora_alpha=float(lora.alpha),
            lora_dropout=float(lora.dropout),
            lora_target_modules=None if targets is None else [str(t) for t in targets],
        )


def is_peft(backbone: nn.Module) -> bool:
    """True when ``backbone`` is a peft model (LoRA adapters)."""
    return hasattr(backbone, "peft_config") and hasattr(backbone, "merge_and_unload")
