"""How evaluation encodes: backend (torch | ONNX Runtime), precision (auto | fp32 | bf16 | tf32), embedding cache.

The settings are a context (like ``torch.autocast``): :func:`encoding` sets them for every
:meth:`cl_bench.models.encoder.SentenceEncoder.encode` call inside it, including the sub-encoders
of wrappers such as QuickThoughts' concatenation. Outside any context, encoding is torch, precision
``auto`` (fp32 on a CPU, bf16 on a CUDA GPU with bf16 units: :func:`resolve_precision`), uncached — what
the dev evaluations during training use (their weights change at every step). When iterating
(``eval.sample_pairs`` set, ``eval=iterate``), ``auto`` is bf16 on a CPU with bf16 units too
(:data:`AUTO_CPU_ITERATING_PRECISION`); the full protocol's figures stay fp32 on a CPU.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import numpy as np
import torch

from cl_bench.models.embedding_cache import atomic_write
from cl_bench.models.encoding_options import (
    InferenceConfigError,
    check_backend_and_precision,
)
from cl_bench.utils.cache_dirs import cache_root

log = logging.getLogger(__name__)

#: ``auto`` takes ONNX Runtime only if its probe embeddings are this close to torch's (cosine distance).
AUTO_MAX_COSINE_DISTANCE = 1e-5
#: Folder (under the cache folder) of the remembered ``auto`` measurements.
AUTO_SUBDIR = "auto_backend"
#: What ``eval.precision=auto`` computes in on a CUDA GPU of compute capability >= 8.0 (bf16 matrix units).
#: ``benchmarks/bench_suite_gpu.py`` prints a real model's STS figures in bf16, TF32 and fp32 side by side:
#: the rule (issue 37) is bf16 while every figure is within :data:`AUTO_MAX_STS_DELTA` of fp32, else TF32.
AUTO_CUDA_PRECISION = "bf16"
#: Largest |STS figure - fp32 figure| (Spearman x 100) that :data:`AUTO_CUDA_PRECISION` may cost.
AUTO_MAX_STS_DELTA = 0.05
#: CPU flags (``/proc/cpuinfo``) of bf16 matrix units: AVX-512 BF16 dot products, AMX tiles.
BF16_CPU_FLAGS: tuple[str, ...] = ("avx512_bf16", "amx_bf16")
#: What ``eval.precision=auto`` and ``train.precision=auto`` compute in on a CPU with bf16 units when iterating
#: (``eval.sample_pairs`` set): ``benchmarks/bench_cpu_bf16.py`` (all-MiniLM-L6-v2, pooler=avg, STS-B and SICK-R dev,
#: every pair and the 300-pair sample) measured every bf16 dev figure within 0.021 of fp32 (docs/benchmarks.md,
#: issue 50), inside :data:`AUTO_MAX_STS_DELTA`; the full protocol (sample_pairs null) stays fp32 on a CPU.
AUTO_CPU_ITERATING_PRECISION = "bf16"


@dataclass(frozen=True)
class EncodingSettings:
    """Resolved encoding options.

    Args:
        backend: ``torch`` or ``onnx`` (``auto`` is resolved by :func:`resolve_backend` first).
        precision: ``auto``, ``fp32``, ``bf16`` or ``tf32`` (resolved per device by :func:`resolve_precision`).
        cache: reuse embeddings of identical (weights, pooler, length, precision, backend, sentences).
        cache_dir: folder of the embedding cache and of the ONNX exports.
        cache_size_gb: the cache folder is pruned to this size, least recently used first.
        iterating: ``eval.sample_pairs`` is set (``eval=iterate``): ``auto`` may pick the CPU's bf16
            (:func:`resolve_precision`).
        backends_used: filled by the encoders: the backends that actually ran (``auto`` resolved).
        precisions_used: filled by the encoders: the precisions that actually ran (``auto`` resolved).
    """

    backend: str = "torch"
    precision: str = "auto"
    cache: bool = False
    cache_dir: Path | None = None
    cache_size_gb: float = 20.0
    iterating: bool = False
    backends_used: set[str] = field(default_factory=set, compare=False)
    precisions_used: set[str] = field(default_factory=set, compare=False)

    def folder(self) -> Path:
        """The cache folder (``cache_dir``, else ``$CL_BENCH_CACHE``, else ``~/.cache/cl-bench``)."""
        return self.cache_dir if self.cache_dir is not None else default_cache_dir()


_SETTINGS: contextvars.ContextVar[EncodingSettings | None] = contextvars.ContextVar("cl_bench_encoding", default=None)


def default_cache_dir() -> Path:
    """cl-bench's cache folder (:func:`cl_bench.utils.cache_dirs.cache_root`)."""
    return cache_root()


def current_settings() -> EncodingSettings:
    """The settings of the innermost :func:`encoding` context (torch, precision auto, no cache outside any)."""
    return _SETTINGS.get() or EncodingSettings()


@contextlib.contextmanager
def encoding(settings: EncodingSettings) -> Iterator[EncodingSettings]:
    """Encode with ``settings`` inside the ``with`` block."""
    token = _SETTINGS.set(settings)
    try:
        yield settings
    finally:
        _SETTINGS.reset(token)


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as the kernel reports them (empty where ``/proc/cpuinfo`` is absent)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def onnxruntime_available() -> bool:
    """Whether ONNX Runtime (and the ``onnx`` package the exporter writes with) can be imported."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def probable_eval_device() -> torch.device:
    """The device a model is evaluated on with ``train.device=auto``: CUDA when present, else CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def check_bf16(device: torch.device) -> None:
    """Raise unless ``device`` has bf16 matrix units (CPU: avx512_bf16/amx_bf16; CUDA: compute >= 8.0)."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        if major < 8:
            raise InferenceConfigError(
                f"eval.precision: bf16 needs CUDA compute capability >= 8.0; this GPU has {major}.{minor}; use fp32"
            )
        return
    if device.type == "cpu":
        if not cpu_has_bf16():
            raise InferenceConfigError(
                f"eval.precision: bf16 needs a CPU with {' or '.join(BF16_CPU_FLAGS)} (bf16 matrix units); "
                "this CPU has neither; use fp32"
            )
        return
    raise InferenceConfigError(f"eval.precision: bf16 is supported on CPU and CUDA, not on {device.type}")


def check_tf32(device: torch.device) -> None:
    """Raise unless ``device`` is a CUDA GPU with TF32 tensor cores (compute capability >= 8.0)."""
    if device.type != "cuda":
        raise InferenceConfigError(f"eval.precision: tf32 is a CUDA precision, not available on {device.type}; use fp32")
    major, minor = torch.cuda.get_device_capability(device)
    if major < 8:
        raise InferenceConfigError(
            f"eval.precision: tf32 needs CUDA compute capability >= 8.0; this GPU has {major}.{minor}; use fp32"
        )


def cpu_has_bf16() -> bool:
    """Whether this CPU has bf16 matrix units (:data:`BF16_CPU_FLAGS`)."""
    return bool(cpu_flags() & set(BF16_CPU_FLAGS))


def resolve_precision(precision: str, device: torch.device | str, backend: str = "torch", iterating: bool = False) -> str:
    """The precision ``precision`` computes in on ``device``: explicit values pass through; ``auto`` is
    :data:`AUTO_CUDA_PRECISION` on a CUDA GPU of compute capability >= 8.0 (with the torch backend),
    :data:`AUTO_CPU_ITERATING_PRECISION` on a CPU with bf16 units when ``iterating`` (``eval.sample_pairs`` set;
    torch backend), and fp32 everywhere else (older GPUs, ONNX Runtime, the full protocol on a CPU), so the full
    protocol's CPU figures are unchanged by ``auto``."""
    if precision != "auto":
        return precision
    device = torch.device(device)
    if backend != "onnx" and device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8:
        return AUTO_CUDA_PRECISION
    if backend != "onnx" and iterating and device.type == "cpu" and cpu_has_bf16():
        return AUTO_CPU_ITERATING_PRECISION
    return "fp32"


@contextlib.contextmanager
def matmul_precision(precision: str, device: torch.device) -> Iterator[None]:
    """The arithmetic of a resolved ``precision`` inside the block: bf16 autocast for ``bf16``, TF32 matmuls
    and convolutions for ``tf32`` (torch's global switches, restored on exit), nothing for ``fp32``."""
    if precision == "bf16":
        with torch.autocast(device.type, dtype=torch.bfloat16):
            yield
        return
    if precision != "tf32":
        yield
        return
    previous = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


def eval_device(train_device: torch.device | str | None) -> torch.device:
    """The device evaluation encodes on: ``train.device`` as named (an encoder is moved there, in
    ``mode=eval`` too), :func:`probable_eval_device` for ``auto``/None.

    Raises:
        InferenceConfigError: a CUDA device named where torch sees none (one line, not CUDA's traceback).
    """
    if train_device is None or str(train_device) == "auto":
        return probable_eval_device()
    device = torch.device(train_device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InferenceConfigError(f"eval.precision: bf16 on {device}, but torch sees no CUDA device")
    return device


def check_inference_options(backend: str, precision: str, device: torch.device | str | None = None) -> None:
    """Validate ``eval.backend``/``eval.precision`` for ``device`` (``train.device``; None or ``auto``: the
    probable eval device).

    Raises:
        InferenceConfigError: one line naming the key.
    """
    check_backend_and_precision(backend, precision)
    if backend == "onnx" and not onnxruntime_available():
        raise InferenceConfigError("eval.backend: onnx needs the onnxruntime and onnx packages (pip install onnxruntime onnx)")
    if precision == "bf16":
        check_bf16(eval_device(device))
    elif precision == "tf32":
        check_tf32(eval_device(device))


def encoding_settings(
    backend: str = "auto", precision: str = "auto", cache: bool = True, cache_dir: str | None = None,
    cache_size_gb: float = 20.0, iterating: bool = False,
) -> EncodingSettings:
    """The :class:`EncodingSettings` of the ``eval.*`` options (``cache_dir`` None: the default folder;
    ``iterating``: ``eval.sample_pairs`` is set)."""
    return EncodingSettings(backend, precision, cache, Path(cache_dir).expanduser() if cache_dir else None, cache_size_gb,
                            iterating)


def resolve_backend(backend: str, precision: str, device: torch.device) -> str:
    """The backends ``backend`` may run here: explicit names pass through; ``auto`` -> ``onnx`` where
    ONNX Runtime is a candidate (fp32 on CPU, installed), else ``torch`` (GPU, bf16, no ONNX Runtime).

    An ``auto`` that resolves to ``onnx`` is only a candidate: the encoder then measures both backends
    on this machine (:func:`measured_auto_choice`) and runs the faster one whose embeddings equal
    torch's. ``auto`` never changes the precision: ``precision`` is resolved first (:func:`resolve_precision`).
    """
    if backend != "auto":
        return backend
    if precision in ("fp32", "auto") and device.type == "cpu" and onnxruntime_available():
        return "onnx"
    return "torch"


@cache
def machine_identity() -> str:
    """What the relative speed of the backends depends on besides the model: CPU model and flags,
    core count, and the library versions."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import onnxruntime

        ort_version = onnxruntime.__version__
    except ImportError:
        ort_version = "-"
    return f"{model}|{' '.join(sorted(cpu_flags()))}|{os.cpu_count()}|torch {torch.__version__}|ort {ort_version}"


@dataclass(frozen=True)
class BackendProbe:
    """What ``eval.backend=auto`` measured on this machine for one model shape (:func:`measured_auto_choice`).

    Args:
        choice: ``onnx`` when ONNX Runtime was faster with torch's embeddings, else ``torch``.
        torch_per_sentence: seconds per sentence with torch on the probe's sentences.
        onnx_per_sentence: the same with ONNX Runtime.
        export_seconds: an export of the backbone and its session, timed.
        path: the JSON file that keeps the measurement.
        reused: where the measurement came from: ``""`` (measured now), ``"this process"`` or ``"file"``.
    """

    choice: str
    torch_per_sentence: float
    onnx_per_sentence: float
    export_seconds: float
    path: Path
    reused: str = ""

    def gain_seconds(self, sentences: int) -> float:
        """Seconds ONNX Runtime saves over torch on ``sentences`` sentences (negative: it is slower)."""
        return (self.torch_per_sentence - self.onnx_per_sentence) * sentences


_AUTO_CHOICES: dict[str, BackendProbe] = {}

#: keys of a model config that do not change how fast it runs (names, labels, versions, dropout at evaluation):
#: a checkpoint of a sweep job times as its base model does (one probe per machine and model shape)
_NOT_SHAPE = ("architectures", "transformers_version", "dtype", "torch_dtype", "id2label", "label2id",
              "initializer_range", "problem_type", "gradient_checkpointing", "finetuning_task")


def model_shape(config: dict) -> dict:
    """The keys of a model config (``config.to_dict()``) that the backends' speed depends on: all but the
    private ones (``_name_or_path``: a checkpoint folder), :data:`_NOT_SHAPE` and the dropout rates."""
    return {k: v for k, v in config.items() if not k.startswith("_") and k not in _NOT_SHAPE and "dropout" not in k}


def _probe_file(architecture: str, folder: Path) -> tuple[str, Path]:
    """The key of ``architecture``'s probe on this machine (CPU, threads, libraries) and the file keeping it."""
    identity = f"{machine_identity()}|threads {torch.get_num_threads()}|{architecture}"
    key = hashlib.blake2b(identity.encode(), digest_size=16).hexdigest()
    return key, Path(folder) / AUTO_SUBDIR / f"{key}.json"


def remembered_probe(architecture: str, folder: Path) -> bool:
    """Whether ``architecture`` was probed on this machine (in this process or in ``folder``'s file)."""
    key, path = _probe_file(architecture, folder)
    return key in _AUTO_CHOICES or path.is_file()


def measured_auto_choice(
    architecture: str, folder: Path, measure: Callable[[], dict[str, float]]
) -> BackendProbe:
    """What ``auto`` measured for encoders of ``architecture`` on this machine.

    ``measure()`` times the torch and ONNX Runtime encoders on the same probe sentences and returns
    ``{"torch": seconds, "onnx": seconds, "max_cosine_distance": d, "sentences": n, "export_seconds": s}``.
    ONNX Runtime is the choice when it was faster and its embeddings equal torch's
    (``d <= AUTO_MAX_COSINE_DISTANCE``), else torch; whether an export for a checkpoint repays is
    :func:`backend_that_repays`' call. The measurement is remembered (in memory and as
    ``<folder>/auto_backend/<key>.json``) per machine, torch thread count and architecture (the model's
    shape, :func:`model_shape`, not its weights), so it runs once; a reuse says where it came from.
    """
    key, path = _probe_file(architecture, folder)
    if key in _AUTO_CHOICES:
        return replace(_AUTO_CHOICES[key], reused="this process")
    reused = "file"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        probe = BackendProbe(str(record["choice"]), record["torch"] / record["sentences"],
                             record["onnx"] / record["sentences"], float(record["export_seconds"]), path, reused)
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):  # none yet, or one without the export's cost
        reused = ""
        timings = measure()
        identical = timings["max_cosine_distance"] <= AUTO_MAX_COSINE_DISTANCE
        choice = "onnx" if identical and timings["onnx"] < timings["torch"] else "torch"
        record = {"choice": choice, **timings, "machine": machine_identity(), "threads": torch.get_num_threads()}

        atomic_write(path, lambda fh: fh.write(json.dumps(record, indent=1).encode()))  # parallel jobs read it
        sentences = max(int(timings["sentences"]), 1)
        probe = BackendProbe(choice, timings["torch"] / sentences, timings["onnx"] / sentences,
                             float(timings["export_seconds"]), path)
    log.info(
        "eval.backend=auto: the probe of this machine and model shape %s: %s faster (torch %.2f ms/sentence, "
        "ONNX Runtime %.2f ms/sentence, export %.1f s, max cosine distance %.1e)",
        {"": f"measured now, kept in {path}", "file": f"reused from {path}"}[reused], probe.choice,
        1e3 * probe.torch_per_sentence, 1e3 * probe.onnx_per_sentence, probe.export_seconds,
        record["max_cosine_distance"],
    )
    _AUTO_CHOICES[key] = probe
    return probe


def backend_that_repays(probe: BackendProbe, sentences: int, exported: bool) -> str:
    """The backend ``auto`` runs for ``sentences`` sentences still to encode: ONNX Runtime only where the probe found
    it faster and its measured gain on them exceeds the export's measured cost (none when ``exported``: this
    checkpoint's export is already there), else torch; said in one line."""
    gain = probe.gain_seconds(sentences)
    cost = 0.0 if exported else probe.export_seconds
    choice = "onnx" if probe.choice == "onnx" and gain > cost else "torch"
    why = ("torch was faster in the probe" if probe.choice != "onnx" else
           f"ONNX Runtime saves about {gain:.1f} s on them {'>' if choice == 'onnx' else '<='} "
           + ("0 s (this checkpoint is exported)" if exported else f"its export's {cost:.1f} s"))
    reused = f"; probe reused ({probe.reused})" if probe.reused else ""
    log.info("eval.backend=auto: %s for %d sentences: %s (measured on this machine, %s%s)", choice, sentences, why,
             probe.path, reused)
    return choice


def time_backends(encode: Callable[[str], np.ndarray], repeats: int = 2) -> dict[str, float]:
    """Time ``encode("torch")`` and ``encode("onnx")`` (after one untimed call each: export, thread
    pools), alternating, best of ``repeats``; also the largest cosine distance between their outputs."""
    outputs = {backend: encode(backend) for backend in ("torch", "onnx")}
    best = {"torch": float("inf"), "onnx": float("inf")}
    for _ in range(repeats):
        for backend in best:
            start = time.perf_counter()
            encode(backend)
            best[backend] = min(best[backend], time.perf_counter() - start)
    a, b = outputs["torch"].astype(np.float64), outputs["onnx"].astype(np.float64)
    cosine = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return {**best, "max_cosine_distance": float(np.max(1.0 - cosine)) if len(a) else 0.0, "sentences": float(len(a))}
