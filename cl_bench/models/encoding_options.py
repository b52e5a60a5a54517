"""The encoding options' names and value rules (``eval.backend``, ``eval.precision``, ``eval.cache*``), torch-free.

:mod:`cl_bench.models.inference` resolves and runs them (and checks what the device and the installed packages allow);
the value rules are here so that the checks before torch loads give the same answers.
"""

from __future__ import annotations

from pathlib import Path

BACKENDS: tuple[str, ...] = ("auto", "torch", "onnx")
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "tf32")


class InferenceConfigError(ValueError):
    """An ``eval.backend``/``eval.precision`` value this machine cannot honour (one line, names the key)."""


def check_backend_and_precision(backend: str, precision: str) -> None:
    """``eval.backend``/``eval.precision`` are known and go together (ONNX Runtime runs fp32 only).

    Raises:
        InferenceConfigError: one line naming the key.
    """
    if backend not in BACKENDS:
        raise InferenceConfigError(f"eval.backend: unknown '{backend}'; valid: {', '.join(BACKENDS)}")
    if precision not in PRECISIONS:
        raise InferenceConfigError(f"eval.precision: unknown '{precision}'; valid: {', '.join(PRECISIONS)}")
    if backend == "onnx" and precision not in ("fp32", "auto"):
        raise InferenceConfigError(
            "eval.backend: onnx runs fp32 only (ONNX Runtime's CPU provider has no bf16 matrix kernels on x86); "
            "use eval.backend=torch or auto with eval.precision=bf16"
        )


def check_cache_options(cache: object, cache_dir: str | None, cache_size_gb: object) -> None:
    """``eval.cache``/``cache_dir``/``cache_size_gb``.

    Raises:
        InferenceConfigError: one line naming the key.
    """
    if not isinstance(cache, bool):
        raise InferenceConfigError(f"eval.cache: must be true or false, got {cache!r}")
    if isinstance(cache_size_gb, bool) or not isinstance(cache_size_gb, int | float) or cache_size_gb <= 0:
        raise InferenceConfigError(f"eval.cache_size_gb: must be > 0, got {cache_size_gb!r}")
    if cache_dir is not None and Path(cache_dir).expanduser().is_file():
        raise InferenceConfigError(f"eval.cache_dir: '{cache_dir}' is a file, not a folder")
