"""What a run's figures were measured with, written beside them (``results.json``'s ``provenance`` and MLflow
tags ``provenance.<field>``), so a table can say how each number came about.

Fields: ``aggregation`` (SentEval's aggregation of the STS12–16 headline figures), ``eval_pooler``,
``eval_mlp`` (``applied`` / ``dropped`` / ``none``) and ``mlp_dropped``, ``dev_selected_step`` and
``dev_metric`` (the checkpoint the figures come from), ``global_batch``, ``processes``,
``gathered_negatives``, ``train_precision`` (``train.precision`` resolved on the device),
``eval_precision``, ``eval_truncate_dim``, ``eval_postprocess`` and ``eval_backend`` (every evaluation
setting that changes the figures, :func:`eval_settings`), ``torch``, ``transformers``, ``cuda`` and
``device_name``; and what the run can be traced to: ``cl_bench_commit`` (:func:`cl_bench.tracking.environment.git_commit`),
``model_revision`` (:func:`model_revision`), ``data_digest`` with ``data_sha256`` (the sha256 of every data
file read, :func:`data_hashes`) and ``packages`` (the versions of the packages on the run's path).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from cl_bench.config import needed_files, spec_class
from cl_bench.data.fetch import sha256_file
from cl_bench.models.inference import resolve_precision
from cl_bench.run_specs import RunSpecs
from cl_bench.tracking.environment import git_commit
from cl_bench.train.precision import autocast_dtype
from cl_bench.utils import distributed
from cl_bench.utils.cache_dirs import cache_root
from cl_bench.utils.distributed import LOCAL_LOSS_KINDS

#: the distributions whose versions a run records (those installed): everything on a run's path that can move a figure
PACKAGES = ("torch", "transformers", "tokenizers", "safetensors", "huggingface-hub", "peft", "onnxruntime", "optimum",
            "numpy", "scipy", "scikit-learn", "pandas", "sentence-transformers", "mteb", "hydra-core", "omegaconf",
            "mlflow", "cl-bench")
#: weight files whose hash stands for a local model's weights
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx", ".gguf")
#: the file-hash cache, in cl-bench's cache folder: path -> size, mtime, sha256
HASH_CACHE = "file_sha256.json"


def package_versions() -> dict[str, str]:
    """``{distribution: version}`` of :data:`PACKAGES` (``not installed`` for those absent)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


class FileHashes:
    """sha256 of files, cached by (absolute path, size, mtime) in ``<cache>/file_sha256.json``: a file hashed
    once costs a ``stat`` the next time; an edit (size or mtime changes) is hashed again."""

    def __init__(self, cache_file: Path | None = None) -> None:
        self.path = cache_file or cache_root() / HASH_CACHE
        try:
            self.entries: dict[str, dict[str, Any]] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.changed = False

    def sha256(self, path: Path) -> str:
        """The file's sha256 (hex), from the cache when its size and mtime are unchanged."""
        key = str(path.resolve())
        info = path.stat()
        entry = self.entries.get(key)
        if entry and entry.get("size") == info.st_size and entry.get("mtime_ns") == info.st_mtime_ns:
            return str(entry["sha256"])

        self.entries[key] = {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "sha256": sha256_file(path)}
        self.changed = True
        return str(self.entries[key]["sha256"])

    def save(self) -> None:
        """Write the cache (atomically: parallel sweep jobs may write it at once; the last one wins, which loses
        nothing but a later re-hash)."""
        if not self.changed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.entries))
            os.replace(tmp, self.path)
        except OSError:  # a read-only cache: the hashes are still right, only not cached
            pass


def _files_under(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    return [path] if path.is_file() else []


def data_hashes(run: RunSpecs, hashes: FileHashes | None = None) -> dict[str, str]:
    """The sha256 of every data file the run reads (the training corpus and the evaluation's files, a folder's
    files one by one): ``{path relative to the data root (absolute outside it): sha256}``. ``run``: the run's specs,
    as its preflight returned them."""
    hashes = hashes or FileHashes()
    root = Path(run.paths.data_dir).absolute()
    paths = [root / rel for _, rel in needed_files(run)]
    if run.training and not Path(run.data.train_file).absolute().is_relative_to(root):
        paths.insert(0, Path(run.data.train_file).absolute())
    found: dict[str, str] = {}
    for path in paths:
        for file in _files_under(path):
            name = file.relative_to(root).as_posix() if file.is_relative_to(root) else str(file)
            found[name] = hashes.sha256(file)
    hashes.save()
    return found


def data_digest(hashes: dict[str, str]) -> str:
    """One sha256 over a run's data files (their names and hashes, sorted) and their count: equal digests, same data."""
    listing = "\n".join(f"{name} {sha}" for name, sha in sorted(hashes.items()))
    return f"sha256:{hashlib.sha256(listing.encode()).hexdigest()} ({len(hashes)} files)"


def model_revision(name_or_path: str, hashes: FileHashes | None = None) -> str:
    """A local model folder: the sha256 over its weight files (``weights sha256:…``); a hub id: the revision
    (commit) of its snapshot in the local Hugging Face cache (``hub <id>@<commit>``)."""
    folder = Path(name_or_path)
    if folder.is_dir():
        hashes = hashes or FileHashes()
        weights = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
        if not weights:
            return f"local folder {folder} (no weight file)"
        listing = "\n".join(f"{p.name} {hashes.sha256(p)}" for p in weights)
        hashes.save()
        return f"weights sha256:{hashlib.sha256(listing.encode()).hexdigest()} ({', '.join(p.name for p in weights)})"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name_or_path, "config.json")
    except Exception:  # noqa: BLE001 (not a valid repo id: say so below)
        cached = None
    if isinstance(cached, str) and "/snapshots/" in cached:
        return f"hub {name_or_path}@{cached.split('/snapshots/')[1].split('/')[0]}"
    return f"hub {name_or_path} (revision unknown: not in the local cache)"


def eval_settings(cfg: DictConfig, device: str | None = None) -> dict[str, str]:
    """The evaluation settings that change the figures: ``eval_truncate_dim`` (the embedding dimensions scored),
    ``eval_postprocess`` (with whitening's k or the flow's corpus), ``eval_precision`` (``auto`` with what it
    resolves to on ``device``, when given), ``eval_backend`` and ``eval_pooling`` (``eval.pooler``, or the run's
    pooler when it is null)."""
    truncate = cfg.eval.get("truncate_dim")
    postprocess = str(cfg.eval.get("postprocess", "none"))
    if postprocess == "whitening":
        postprocess += f" (k={cfg.eval.get('whitening') or 'all'})"
    elif postprocess == "flow":
        postprocess += f" (corpus={cfg.eval.flow.get('corpus')}, pooler={cfg.eval.flow.get('pooler')})"
    return {
        "eval_truncate_dim": "all (no truncation)" if truncate is None else str(truncate),
        "eval_postprocess": postprocess,
        "eval_precision": _precision(str(cfg.eval.get("precision", "fp32")), str(cfg.eval.get("backend", "auto")), device,
                                     cfg.eval.get("sample_pairs") is not None),
        "eval_backend": str(cfg.eval.get("backend", "auto")),
        "eval_pooling": (f"{cfg.pooler.name} (the run's pooler)" if cfg.eval.get("pooler") is None
                         else f"{cfg.eval.pooler} (eval.pooler; trained with {cfg.pooler.name})"),
    }


def _precision(precision: str, backend: str, device: str | None, iterating: bool = False) -> str:
    """``auto`` shown with the precision it computes in on ``device`` (``auto (bf16)``): a comparison of runs
    later sees what the arithmetic was."""
    if precision != "auto" or device is None:
        return precision

    return f"auto ({resolve_precision(precision, device, 'onnx' if backend == 'onnx' else 'torch', iterating)})"


def eval_settings_line(cfg: DictConfig, device: str | None = None) -> str:
    """The line printed under the STS table: the evaluation settings that change its figures."""
    settings = eval_settings(cfg, device)
    return ("evaluated with: embedding dimensions " + settings["eval_truncate_dim"] + ", post-processing "
            + settings["eval_postprocess"] + ", precision " + settings["eval_precision"] + ", backend "
            + settings["eval_backend"] + ", pooling " + settings["eval_pooling"])


def eval_mlp(encoder: Any) -> str:
    """Whether the evaluated encoder's ``cls`` MLP head is applied at evaluation: ``applied``, ``dropped``
    (trained with it, ``mlp_only_train``: SimCSE's unsupervised setting) or ``none`` (no MLP)."""
    mlp = getattr(encoder, "mlp", None)
    if mlp is None or getattr(encoder, "pooler", "cls") != "cls":
        return "none"
    return "dropped" if getattr(encoder, "mlp_only_train", False) else "applied"


def device_name(device: str) -> str:
    """The GPU's name on CUDA, else the CPU's (``platform.processor()``, the machine type when empty)."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"cpu ({platform.processor() or platform.machine()})"


def _gathered(cfg: DictConfig, processes: int) -> str:
    if cfg.mode != "train":
        return "n/a (mode=eval)"
    if processes < 2:
        return "n/a (one process)"

    if "loss" not in spec_class(cfg, "method").uses:
        return "no (the method has no loss group)"
    kind = spec_class(cfg, "loss").kind
    return f"no ({kind} loss: exact on each process's rows)" if kind in LOCAL_LOSS_KINDS else "yes (all processes)"


def run_provenance(cfg: DictConfig, specs: RunSpecs, encoder: Any, device: str,
                   best_step: int | None = None) -> dict[str, Any]:
    """The provenance of a run's final figures (see the module docstring): text values, and two mappings
    (``data_sha256``: file -> sha256, ``packages``: distribution -> version).

    Args:
        cfg: the run's composed config.
        specs: its typed specs (the preflight's: the files the run reads are found without building them again).
        encoder: the encoder the final evaluation scored.
        device: the device it ran on (``cuda``, ``cpu``...).
        best_step: the dev-selected step of a training run (None for ``mode=eval``).
    """
    import torch
    import transformers

    processes = distributed.world_size() if cfg.mode == "train" else 1
    mlp = eval_mlp(encoder)
    train_precision = "n/a (mode=eval)"
    if cfg.mode == "train":
        dtype = autocast_dtype(str(cfg.train.precision), torch.device(device), cfg.eval.get("sample_pairs") is not None)
        train_precision = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]

    hashes = FileHashes()
    data = data_hashes(specs, hashes)
    return {
        **eval_settings(cfg, device),
        "cl_bench_commit": git_commit(),
        "model_revision": model_revision(str(cfg.model.name_or_path), hashes),
        "data_digest": data_digest(data),
        "data_sha256": data,
        "packages": package_versions(),
        "aggregation": "all (STS12-16 sub-datasets pooled, SentEval; <task>_mean/_wmean also logged)",
        "eval_pooler": str(getattr(encoder, "pooler", cfg.pooler.name)),
        "eval_mlp": mlp,
        "mlp_dropped": str(mlp == "dropped").lower(),
        "dev_selected_step": str(best_step) if best_step is not None else "n/a (mode=eval)",
        "dev_metric": str(cfg.train.select_metric) if cfg.mode == "train" else "n/a (mode=eval)",
        "global_batch": str(cfg.train.batch_size) if cfg.mode == "train" else "n/a (mode=eval)",
        "processes": str(processes),
        "gathered_negatives": _gathered(cfg, processes),
        "train_precision": train_precision,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": str(torch.version.cuda or "none"),
        "device_name": device_name(device),
    }
