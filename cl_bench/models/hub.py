"""Whether a model can be loaded at all, decided before any weights load and before torch is imported.

A local folder needs its ``config.json``; a hub id needs a cached copy or the hub (one quick probe). Torch-free, so
``cl-bench`` gives these answers before the job starts (:mod:`cl_bench.config.early_checks`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class ModelLoadError(RuntimeError):
    """Raised with a one-line, actionable message when a model cannot be loaded."""


def is_local_path(name_or_path: str) -> bool:
    """True when ``name_or_path`` names a local directory rather than a hub id."""
    return os.path.isdir(name_or_path) or name_or_path.startswith((".", "/", "~"))


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
    example = _local_model_example(decoder)
    return (
        f"model.name_or_path: cannot load '{name_or_path}' from the Hugging Face hub (offline or no network); "
        "point model.name_or_path at a local Hugging Face directory"
        + (f", e.g. model.name_or_path={example}" if example else "")
        + f", or put the hub model in the cache on a machine with network (how: {OFFLINE_MODELS_DOC})"
    )


def wants_decoder(pooler: str | None, bidirectional: object = False) -> bool:
    """Whether a run's settings are a decoder's: ``pooler=last_token`` or ``model.bidirectional=true``."""
    return pooler == "last_token" or bool(bidirectional)


def local_model_is_decoder(folder: Path) -> bool | None:
    """From a local folder's config.json alone (torch-free): True for a decoder language model (an architecture
    ``…ForCausalLM`` / ``…LMHeadModel``), False for an encoder, None when its config names no architecture."""
    import json

    try:
        architectures = json.loads((folder / "config.json").read_text()).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return None
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
            raise ModelLoadError(f"model.name_or_path: no Hugging Face model at '{path}' (config.json missing)")
        return
    from huggingface_hub import constants, try_to_load_from_cache

    cached = isinstance(try_to_load_from_cache(name_or_path, "config.json"), str)
    if offline():
        if not cached:
            raise ModelLoadError(hub_hint(name_or_path, decoder))
        return
    from cl_bench.utils.network import host_reachable

    if host_reachable(constants.ENDPOINT):
        return
    if not cached:
        raise ModelLoadError(hub_hint(name_or_path, decoder))
    log.warning("the Hugging Face hub cannot be reached: loading the cached copy of %s (offline mode)", name_or_path)
    _go_offline(constants)


def _go_offline(constants: Any) -> None:
    """Offline mode for this process (huggingface_hub reads its flag at call time, subprocesses the env)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True
