"""Command-line options and set-up shared by the evaluation benchmarks."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from cl_bench.models.encoder import SentenceEncoder, build_encoder


def encoder_parser(description: str | None) -> argparse.ArgumentParser:
    """A parser with the options every evaluation benchmark takes: model, pooler, data, batch, threads."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("CL_BENCH_MINILM", "../shared/models/all-MiniLM-L6-v2"))
    parser.add_argument("--pooler", default="avg")
    parser.add_argument("--data", default=os.environ.get("CL_BENCH_DATA", "../shared/data"))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    return parser


def load_encoder(args: argparse.Namespace) -> SentenceEncoder:
    """Set the torch thread count and load the encoder as evaluation does."""
    torch.set_num_threads(args.threads)
    return build_encoder(args.model, pooler=args.pooler, fresh_mlp=False)


def print_machine() -> None:
    """Print the CPU model, its bf16/AMX/AVX-512 flags, torch's CPU capability and the load average."""
    import platform
    import subprocess

    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        lscpu = ""
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")), platform.processor())
    flags = next((line.split(":", 1)[1].split() for line in lscpu.splitlines() if line.startswith("Flags")), [])
    wanted = [f for f in flags if f.startswith(("avx512f", "avx512_bf16", "amx", "avx2"))]
    print(f"cpu: {model}; {os.cpu_count()} cores; flags: {' '.join(sorted(wanted))}")
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, threads {torch.get_num_threads()}")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


# ------------------------------------------------------------------------------------------------
# The machine's matrix-multiply peak, and an encoder's arithmetic measured against it
# ------------------------------------------------------------------------------------------------
#: (M, K, N): attention projections (384x384), FFN up (384x1536) and down (1536x384) at M = 4096 tokens.
SHAPES: tuple[tuple[int, int, int], ...] = ((4096, 384, 384), (4096, 384, 1536), (4096, 1536, 384))


def gflops(function: Callable[[], object], flops: float, repeats: int, inner: int = 10,
           clock: Callable[[], float] = time.perf_counter) -> float:
    """Best GFLOP/s over ``repeats`` timings of ``inner`` calls (after one warm-up call); ``clock``
    ``time.process_time`` gives GFLOP per CPU-second (all threads), which time-slicing on a shared
    machine does not lower."""
    function()
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(inner):
            function()
        best = min(best, (clock() - start) / inner)
    return flops / best / 1e9


def onnx_matmul(b: np.ndarray, threads: int) -> Callable[[np.ndarray], list]:
    """An ONNX Runtime CPU session computing X @ b (b a constant initializer, as a model weight is)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, b.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, b.shape[1]])],
        [numpy_helper.from_array(b, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})


def fp32_gemm_peaks(threads: int, repeats: int = 3, clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Best fp32 GFLOP/s over :data:`SHAPES` of torch, NumPy's BLAS and ONNX Runtime (MLAS), each on
    ``threads`` threads: the rate an encoder's matrix products can reach on this machine, measured in the
    same run (``clock``: as :func:`gflops`)."""
    from threadpoolctl import threadpool_limits

    from cl_bench.models.inference import onnxruntime_available

    torch.set_num_threads(threads)
    peaks = {"torch": 0.0, "numpy": 0.0}
    if onnxruntime_available():
        peaks["onnxruntime"] = 0.0
    for m, k, n in SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        a_np, b_np = a.numpy(), b.numpy()
        flops = 2.0 * m * k * n
        peaks["torch"] = max(peaks["torch"], gflops(lambda a=a, b=b: a @ b, flops, repeats, 5, clock))
        with threadpool_limits(threads):  # NumPy's BLAS would use every core
            peaks["numpy"] = max(peaks["numpy"], gflops(lambda a=a_np, b=b_np: a @ b, flops, repeats, 5, clock))
        if "onnxruntime" in peaks:
            run = onnx_matmul(b_np, threads)
            peaks["onnxruntime"] = max(peaks["onnxruntime"], gflops(lambda run=run, a=a_np: run(a), flops, repeats, 5, clock))
    return peaks


def encoder_flops(config: Any, batches: list[tuple[int, int]]) -> float:
    """Floating-point operations of a BERT-style encoder's forward pass over ``batches`` of
    (rows, padded length): per layer the Q, K, V and output projections (8·H² per token), the
    feed-forward network (4·H·I per token) and attention's scores and weighted sum (4·L·H per token,
    L the padded length); 2 FLOPs per multiply-add. Layer norm, softmax, GELU and the embeddings are
    element-wise and not counted (their share is what the profile shows)."""
    hidden, inner, layers = int(config.hidden_size), int(config.intermediate_size), int(config.num_hidden_layers)
    per_layer = sum(rows * length * (8 * hidden * hidden + 4 * hidden * inner + 4 * length * hidden)
                    for rows, length in batches)
    return float(layers * per_layer)


class BatchShapes:
    """Records (rows, padded length) of every batch an encoder pads (``tokenizer.pad``: each batch of
    :meth:`SentenceEncoder.encode`, whatever the backend), for :func:`encoder_flops`, with the real
    (unpadded) tokens and the time spent padding."""

    def __init__(self, encoder: SentenceEncoder) -> None:
        self.batches: list[tuple[int, int]] = []
        self.real_tokens = 0
        self.pad_seconds = 0.0
        self._pad = encoder.tokenizer.pad
        encoder.tokenizer.pad = self  # type: ignore[method-assign]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        batch = self._pad(*args, **kwargs)
        self.pad_seconds += time.perf_counter() - start
        rows, length = batch["input_ids"].shape
        self.batches.append((int(rows), int(length)))
        self.real_tokens += int(batch["attention_mask"].sum())
        return batch

    def reset(self) -> None:
        """Forget what was recorded (before the next timed encoding)."""
        self.batches, self.real_tokens, self.pad_seconds = [], 0, 0.0

    def padded_tokens(self) -> int:
        return sum(rows * length for rows, length in self.batches)


def rate_line(seconds: float, flops: float, peak: float, unit: str = "GFLOP/s") -> str:
    """``12.3 GFLOP/s = 45% of the 27.1 GFLOP/s fp32 GEMM peak``."""
    rate = flops / seconds / 1e9
    return f"{rate:6.1f} {unit} = {100 * rate / peak:3.0f}% of the {peak:.1f} {unit} fp32 GEMM peak"


def rates(wall: float, cpu: float, flops: float, peaks: tuple[dict[str, float], dict[str, float]]) -> str:
    """The achieved rate against the fastest GEMM rate, per wall second and per CPU-second (all threads:
    the robust figure on a shared machine, where a process gets only part of the cores' time)."""
    return (f"{rate_line(wall, flops, max(peaks[0].values()))}; "
            f"{rate_line(cpu, flops, max(peaks[1].values()), 'GFLOP/CPU-s')}")


def measure_peaks(threads: int) -> tuple[dict[str, float], dict[str, float]]:
    """:func:`fp32_gemm_peaks` per wall second and per CPU-second, printed."""
    peaks = fp32_gemm_peaks(threads), fp32_gemm_peaks(threads, clock=time.process_time)
    for label, values in zip(("GFLOP/s", "GFLOP/CPU-s"), peaks, strict=True):
        print(f"fp32 GEMM peak ({threads} threads, bench_gemm.py shapes), {label}: "
              + ", ".join(f"{lib} {rate:.1f}" for lib, rate in values.items()), flush=True)
    return peaks


#: torch operator -> where its time goes (self CPU time; anything unlisted is "other tensor ops")
OP_CATEGORIES: dict[str, str] = {
    "aten::addmm": "matrix multiply (linear layers)", "aten::mm": "matrix multiply (linear layers)",
    "aten::bmm": "attention", "aten::baddbmm": "attention", "aten::_softmax": "attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention",
    "aten::_scaled_dot_product_attention_math": "attention",
    "aten::native_layer_norm": "layer norm", "aten::gelu": "GELU",
    # memory-bound: the heads' transpose made contiguous before the output projection, and the residual adds
    "aten::copy_": "copies (contiguous, dtype)", "aten::add": "residual adds",
}


def profile_encoding(encoder: SentenceEncoder, sentences: list[str], batch_size: int) -> list[tuple[str, float]]:
    """Where a torch fp32 ``encode`` of ``sentences`` spends its wall time, in seconds per part:
    tokenisation (once, before the batches), padding (each batch), the operator groups of
    :data:`OP_CATEGORIES` (torch.profiler's self CPU time of the calling thread: an op's intra-op
    threads run inside it) and the rest (Python, the module calls, pooling, copies out)."""
    from torch.profiler import ProfilerActivity, profile

    from cl_bench.models.inference import EncodingSettings, encoding

    start = time.perf_counter()
    encoder._token_ids(list(dict.fromkeys(sentences)))
    tokenise = time.perf_counter() - start
    shapes = BatchShapes(encoder)
    try:
        with encoding(EncodingSettings("torch", "fp32")), profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            encoder.encode(sentences, batch_size=batch_size)
            wall = time.perf_counter() - start
    finally:
        encoder.tokenizer.pad = shapes._pad  # type: ignore[method-assign]
    parts: dict[str, float] = {"tokenisation": tokenise, "padding (tokenizer.pad)": shapes.pad_seconds}
    for event in prof.key_averages():
        category = OP_CATEGORIES.get(event.key)
        if category is None and event.key.startswith("aten::") and event.self_cpu_time_total > 0:
            category = "other tensor ops (embedding, masks, views, pooling)"
        if category is not None:
            parts[category] = parts.get(category, 0.0) + event.self_cpu_time_total / 1e6
    parts["Python and framework (the rest)"] = wall - sum(parts.values())
    return [("total (profiled)", wall), *sorted(parts.items(), key=lambda item: -item[1])]
