"""The on-disk embedding cache and the digests that key it (and the ONNX exports).

An entry is the (N, H) float32 embeddings of one list of distinct sentences, stored as ``.npy``
under a key that hashes everything the vectors depend on: the encoder's weights (every parameter
and buffer, bit for bit), its class and pooling options, the tokenizer, the length limit, the
backend and the precision, and the sentences themselves. Changing any weight changes the key, so
a stale entry can never be served. The folder is pruned to a size limit, least recently used first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

log = logging.getLogger(__name__)

EMBEDDINGS_SUBDIR = "embeddings"


def state_digest(module: nn.Module) -> str:
    """Hex digest of a module's parameters and buffers (names, dtypes, shapes and raw bytes).

    Costs one pass over the weights (0.7 s for all-MiniLM-L6-v2's 90 MB on our 2 shared cores under
    load 19, where encoding STS-B's 5,383 sentences took 189–304 s), small next to any evaluation.
    """
    digest = hashlib.blake2b(digest_size=20)
    for name, tensor in sorted(module.state_dict().items()):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def tokenizer_digest(tokenizer: Any) -> str:
    """Hex digest of a tokenizer's full definition (vocabulary, normaliser, special tokens).

    The fast tokenizer's padding/truncation state is left out: every call sets it anew.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        definition = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("padding", "truncation")}
        text = json.dumps(definition, sort_keys=True)
    else:
        text = json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.blake2b(f"{type(tokenizer).__name__}|{text}".encode(), digest_size=20).hexdigest()


def sentences_digest(sentences: Sequence[str]) -> str:
    """Hex digest of an ordered list of sentences (JSON-encoded, so no separator can collide)."""
    return hashlib.blake2b(json.dumps(list(sentences)).encode(), digest_size=20).hexdigest()


def cache_key(identity: dict[str, Any], sentences: Sequence[str]) -> str:
    """The entry name for ``sentences`` encoded by the encoder described by ``identity``."""
    blob = json.dumps({**identity, "sentences": sentences_digest(sentences)}, sort_keys=True)
    return hashlib.blake2b(blob.encode(), digest_size=20).hexdigest()


def respect_umask(*paths: Path) -> None:
    """Give files the mode a plain ``open`` would (0666 less the umask): ``mkstemp``, which
    transformers' ``save_pretrained`` and :func:`atomic_write` use, makes them 0600, unreadable by
    the group that shares a run or cache folder. Folders are walked."""
    mask = os.umask(0)
    os.umask(mask)
    for path in paths:
        for file in ([path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []):
            os.chmod(file, 0o666 & ~mask)


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(file_object)`` on a temporary file beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        respect_umask(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def prune(folder: Path, limit_gb: float) -> None:
    """Delete the least recently used files under ``folder`` until it holds at most ``limit_gb``."""
    files = [(p.stat().st_mtime, p.stat().st_size, p) for p in folder.rglob("*") if p.is_file()]
    total = sum(size for _, size, _ in files)
    limit = limit_gb * 1024**3
    for _, size, path in sorted(files):
        if total <= limit:
            break
        path.unlink(missing_ok=True)
        total -= size
        log.info("embedding cache over %.1f GB: removed %s", limit_gb, path)


class EmbeddingCache:
    """Embeddings on disk under ``folder/embeddings/<key>.npy``.

    Args:
        folder: the cache folder (shared with the ONNX exports).
        limit_gb: prune the folder to this size after each store.
    """

    def __init__(self, folder: Path, limit_gb: float) -> None:
        self.folder = Path(folder)
        self.limit_gb = limit_gb

    def _path(self, key: str) -> Path:
        return self.folder / EMBEDDINGS_SUBDIR / f"{key}.npy"

    def load(self, key: str, rows: int) -> np.ndarray | None:
        """The stored (rows, H) embeddings of ``key``, or None on a miss (or an unreadable entry)."""
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            vectors = np.load(path)
        except (OSError, ValueError) as err:
            log.warning("embedding cache: unreadable %s (%s); encoding again", path, err)
            return None
        if vectors.ndim != 2 or vectors.shape[0] != rows:
            return None
        os.utime(path)  # recently used: pruned last
        return vectors

    def contains(self, key: str) -> bool:
        """Whether an entry for ``key`` is stored (``load`` may still refuse an unreadable one)."""
        return self._path(key).is_file()

    def store(self, key: str, vectors: np.ndarray) -> None:
        """Write an entry atomically, then prune the folder."""
        atomic_write(self._path(key), lambda fh: np.save(fh, np.ascontiguousarray(vectors, dtype=np.float32)))
        prune(self.folder, self.limit_gb)
