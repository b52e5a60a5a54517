"""Whether a model can be loaded at all, decided before any weights load and before torch is imported.

A local folder needs its ``config.json``; a hub id needs a cached copy or the hub (one quick probe). Torch-free, so
``cl-bench`` gives these answers before the job starts (:mod:`cl_bench.config.early_checks`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from cl_bench.utils.rundir import ENCODER_META_FILE

log = logging.getLogger(__name__)


class ModelLoadError(RuntimeError):
    """Raised with a one-line, actionable message when a model cannot be loaded.

    The checks of ``model.name_or_path`` (:func:`check_model_reachable`) also give the message's parts, so that a caller
    checking another key (``method.generator``, ``method.guide``) words it for that key without reading the message:
    ``reason`` (what is wrong, without the key) and ``fix`` (what to do; may be empty).
    """

    def __init__(self, message: str = "", *, reason: str = "", fix: str = "") -> None:
        super().__init__(message or f"model.name_or_path: {reason}" + (f"; {fix}" if fix else ""))
        self.reason = reason or str(self)
        self.fix = fix


#: a Hugging Face hub id: ``name`` or ``namespace/name`` (huggingface_hub's ``validate_repo_id``: letters, digits,
#: ``-``, ``_``, ``.``; no ``--`` or ``..``; at most 96 characters)
_HUB_ID = re.compile(r"^(?:[\w\-.]+/)?[\w\-.]+$")


def is_hub_id(name: str) -> bool:
    """Whether ``name`` has the form of a hub repository id (it may still not exist)."""
    return bool(_HUB_ID.match(name)) and "--" not in name and ".." not in name and len(name) <= 96


def is_local_path(name_or_path: str) -> bool:
    """True when ``name_or_path`` names a local directory rather than a hub id: a folder that is there, a name that
    starts like a path (``.``, ``/``, ``~``), or one with a path separator that no hub id has
    (``outputs/runs/<date>/<time>/best_model``: a mistyped run folder is a missing folder, not a hub id)."""
    return (os.path.isdir(name_or_path) or name_or_path.startswith((".", "/", "~"))
            or ((os.sep in name_or_path or "/" in name_or_path) and not is_hub_id(name_or_path)))


def missing_folder_hint(path: Path) -> str:
    """``(folder outputs/runs/2026-13-01 not found)`` for a path whose parent is missing: the first missing one, so a
    mistyped date or time in a run folder's path is named; empty when the parent is there."""
    missing = path
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    return f" (folder {missing} not found)" if missing != path else ""


def offline() -> bool:
    """True when Hugging Face's offline mode is on (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False") or os.environ.get(
        "TRANSFORMERS_OFFLINE", "0"
    ) not in ("0", "", "false", "False")


#: where the docs say how to put a hub model into the local cache for offline use
OFFLINE_MODELS_DOC = "docs/compare.md#offline-models-that-are-not-on-the-machine"


def hub_hint(name_or_path: str, decoder: bool | None = None) -> str:
    """The one-line error for a hub model that cannot be fetched: point at a local folder of the same kind (one that
    exists, if any) and at the docs' recipe for caching a hub model.

    Args:
        name_or_path: the hub id asked for.
        decoder: whether the run wants a decoder language model (``pooler=last_token``, ``model.bidirectional``;
            None: unknown). An example folder is given only when its kind is known to match: an encoder folder
            (all-MiniLM-L6-v2) is no example for a decoder run, nor a decoder for an encoder run.
    """
    return str(_hub_error(name_or_path, decoder))


def _hub_error(name_or_path: str, decoder: bool | None = None) -> ModelLoadError:
    """:func:`hub_hint`'s error, with its parts."""
    example = _local_model_example(decoder)
    return ModelLoadError(
        reason=f"cannot load '{name_or_path}' from the Hugging Face hub (offline or no network)",
        fix="point model.name_or_path at a local Hugging Face directory"
        + (f", e.g. model.name_or_path={example}" if example else "")
        + f", or put the hub model in the cache on a machine with network (how: {OFFLINE_MODELS_DOC})",
    )


def wants_decoder(pooler: str | None, bidirectional: object = False) -> bool:
    """Whether a run's settings are a decoder's: ``pooler=last_token`` or ``model.bidirectional=true``."""
    return pooler == "last_token" or bool(bidirectional)


def local_model_is_decoder(folder: Path) -> bool | None:
    """From a local folder's config.json alone (torch-free): True for a decoder language model (an architecture
    ``…ForCausalLM`` / ``…LMHeadModel``), False for an encoder, None when its config names no architecture."""
    architectures = (local_config(str(folder)) or {}).get("architectures") or []
    if not architectures:
        return None
    return any(str(a).endswith(("ForCausalLM", "LMHeadModel")) for a in architectures)


def _local_model_example(decoder: bool | None = None) -> str | None:
    """A local model folder that exists, to show in the hub hint (None: no example rather than a wrong one).

    Looked for where the README's offline setup puts one: ``models/`` beside the user's data root
    (``$CL_BENCH_DATA/../models``), named by its absolute path: a path relative to this repository's own test set-up
    (``../shared/...``) names nothing on a user's machine. With ``decoder`` given, only a folder whose config says
    it is of that kind.
    """
    roots = [Path(os.environ["CL_BENCH_DATA"]).resolve().parent / "models"] if os.environ.get("CL_BENCH_DATA") else []
    for root in roots:
        found = sorted(p.parent for p in root.glob("*/config.json")) if root.is_dir() else []
        for folder in found:
            if decoder is None or local_model_is_decoder(folder) is decoder:
                return str(folder)
    return None


def check_model_reachable(name_or_path: str, decoder: bool | None = None) -> None:
    """Fail fast, before any weights load, when the model can obviously not be loaded.

    A local path needs its ``config.json``. A hub id needs a cached copy or the hub: one quick
    probe (:func:`cl_bench.utils.network.host_reachable`) replaces the HTTP client's retries. When the hub
    cannot be reached but the model is cached, offline mode is switched on so the cached copy
    loads at once.

    Args:
        name_or_path: hub id or local folder.
        decoder: whether the run wants a decoder (:func:`wants_decoder`; None: unknown), for the hint's example.

    Raises:
        ModelLoadError: one line naming ``model.name_or_path`` and the fix.
    """
    if is_local_path(name_or_path):
        path = Path(name_or_path).expanduser()
        if not (path / "config.json").is_file():
            why = missing_folder_hint(path) or " (config.json missing)"
            raise ModelLoadError(reason=f"no Hugging Face model at '{path}'{why}")
        for weights in sorted(path.glob("*.safetensors")):
            check_safetensors(weights)
        recorded_encoder_class(path)
        return
    if not is_hub_id(name_or_path):  # the hub's validator would answer with a traceback
        raise ModelLoadError(reason=f"'{name_or_path}' is neither a local folder nor a Hugging Face hub id "
                             "(name or namespace/name: letters, digits, '-', '_', '.')")
    from huggingface_hub import constants, try_to_load_from_cache

    cached = isinstance(try_to_load_from_cache(name_or_path, "config.json"), str)
    if offline():
        if not cached:
            raise _hub_error(name_or_path, decoder)
        return
    # urllib.request (0.05-0.15 s): only a hub id that is not cached asks the network; the method specs import this module
    from cl_bench.utils.network import host_reachable

    if host_reachable(constants.ENDPOINT):
        return
    if not cached:
        raise _hub_error(name_or_path, decoder)
    log.warning("the Hugging Face hub cannot be reached: loading the cached copy of %s (offline mode)", name_or_path)
    _go_offline(constants)


def _go_offline(constants: Any) -> None:
    """Offline mode for this process (huggingface_hub reads its flag at call time, subprocesses the env)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True


def check_safetensors(path: Path) -> None:
    """A ``.safetensors`` file's header, read as the format defines it, without torch or the safetensors library: 8
    bytes of little-endian header length, a JSON header of that length, and each tensor's byte range inside the file.
    A truncated or garbage file fails here, before any run folder or MLflow run is made, instead of in the loader.

    Raises:
        ModelLoadError: one line naming the file and what is wrong.
    """
    def bad(why: str) -> ModelLoadError:
        return ModelLoadError(reason=f"{path}: not a readable safetensors file ({why})", fix="re-save or re-copy the model")

    size = path.stat().st_size
    with path.open("rb") as raw:
        head = raw.read(8)
        if len(head) < 8:
            raise bad(f"{size} bytes, shorter than its 8-byte header length")
        length = int.from_bytes(head, "little")
        if length > size - 8 or length > 100_000_000:  # safetensors' own limit on the header (100 MB)
            raise bad(f"header length {length} exceeds the file's {size} bytes")
        try:
            header = json.loads(raw.read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise bad(f"header is not JSON: {err}") from None
    if not isinstance(header, dict):
        raise bad("header is not a JSON object")
    data = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise bad(f"tensor {name!r} has no data_offsets")
        if not 0 <= offsets[0] <= offsets[1] <= data:
            raise bad(f"tensor {name!r} ends at byte {offsets[1]} of {data} data bytes: the file is truncated")


#: the :class:`~cl_bench.models.encoder.SentenceEncoder` classes a model folder may name (``encoder_class`` in its
#: ``cl_bench_encoder.json``), each with the cl-bench module that defines it. A folder chooses an entry of this table
#: by name; no module named in a folder is ever imported (a shared model folder chooses no code).
#: tests/models/test_encoder_registry.py checks it against every SentenceEncoder subclass in cl_bench.
ENCODER_CLASSES = {
    "SentenceEncoder": "cl_bench.models.encoder",
    "ISBERTEncoder": "cl_bench.methods.is_bert.modeling",
    "PromptBERTEncoder": "cl_bench.methods.promptbert.modeling",
}
#: the module an entry's class lived in when folders recorded its ``module.Name`` path (before each method was a
#: folder): such folders still load as that entry
_RECORDED_MODULES_BEFORE = {"ISBERTEncoder": "cl_bench.methods.is_bert", "PromptBERTEncoder": "cl_bench.methods.promptbert"}


def encoder_class_name(recorded: object, where: Path | str) -> str:
    """The :data:`ENCODER_CLASSES` name of a recorded ``encoder_class``: the name, or (folders saved before the
    registry) the ``module.Name`` path of an entry.

    Raises:
        ModelLoadError: one line naming the file and the valid names, for anything else.
    """
    text = str(recorded)
    name = text.rpartition(".")[2]
    recorded_paths = {f"{module}.{name}" for module in (ENCODER_CLASSES.get(name), _RECORDED_MODULES_BEFORE.get(name)) if module}
    if name in ENCODER_CLASSES and (text == name or text in recorded_paths):
        return name
    raise ModelLoadError(f"{where}: encoder_class {text!r} is not one of cl-bench's encoder classes "
                         f"({', '.join(ENCODER_CLASSES)}); nothing is imported from a model folder")


def recorded_encoder_class(folder: Path) -> str | None:
    """The registry name of the encoder class a local model folder records (None: no record, a plain encoder).

    Raises:
        ModelLoadError: an unreadable record or a class name outside :data:`ENCODER_CLASSES`.
    """
    meta_path = folder / ENCODER_META_FILE
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ModelLoadError(reason=f"{meta_path}: unreadable ({err})") from None
    if not isinstance(meta, dict):
        raise ModelLoadError(reason=f"{meta_path}: not a JSON object")
    recorded = meta.get("encoder_class")
    return None if not recorded else encoder_class_name(recorded, f"model.name_or_path: {meta_path}")


def local_config(name_or_path: str) -> dict[str, Any] | None:
    """A local checkpoint folder's config.json read as JSON (no model library imported); None for a hub id
    or an unreadable file."""
    try:
        config = json.loads((Path(name_or_path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def local_model_type(name_or_path: str) -> str | None:
    """``model_type`` from a local checkpoint folder's config.json; None for a hub id or an unreadable file
    (the model's loader then says what is wrong)."""
    config = local_config(name_or_path)
    return None if config is None or "model_type" not in config else str(config["model_type"])


#: the config.json key that transformers reads as ``hidden_size`` (its config class's ``attribute_map``), per
#: ``model_type``; tests/config/test_early_checks.py checks each against transformers' own config classes
WIDTH_KEYS = {**dict.fromkeys(("bert", "roberta", "xlm-roberta", "electra", "mpnet", "deberta", "deberta-v2", "albert",
                               "camembert", "modernbert", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3",
                               "gpt_neox", "opt"), "hidden_size"),
              "gpt2": "n_embd", "distilbert": "dim", "t5": "d_model", "mt5": "d_model", "bart": "d_model"}


def local_model_width(name_or_path: str) -> int | None:
    """A local checkpoint folder's embedding width from its config.json, read as JSON (no model library
    imported): the key transformers reads as ``hidden_size`` for its ``model_type`` (:data:`WIDTH_KEYS`).
    None for a hub id, another model type, a folder with its own config code (``auto_map``) or an unreadable
    file: then transformers' ``AutoConfig`` answers (:func:`cl_bench.config._model_width`)."""
    config = local_config(name_or_path)
    try:
        width = config[WIDTH_KEYS[config["model_type"]]]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    if "auto_map" in config or isinstance(width, bool) or not isinstance(width, int):
        return None
    return width
