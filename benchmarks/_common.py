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


# ------------------------------------------------------------------------------------------------
# GPU (or CPU) runs on a randomly initialised model: device, machine, same-run GEMM peaks (issue 25 item 4)
# ------------------------------------------------------------------------------------------------
#: ``--random-config`` name -> BertConfig overrides. ``bert-base``: ``BertConfig()``'s defaults, which are
#: bert-base-uncased's shape (12 layers, H 768, 12 heads, FFN 3072, vocabulary 30,522); ``tiny``: the
#: 2-layer shape of the CPU smoke run.
RANDOM_CONFIGS: dict[str, dict[str, int]] = {
    "bert-base": {},
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 256},
}

#: Datasheet dense (no sparsity) bf16 tensor-core TFLOP/s, printed as context only: the MFU divides by the
#: fastest bf16 matrix product measured in the same run. (GPU name substrings, most specific first.)
DATASHEET_BF16_TFLOPS: tuple[tuple[tuple[str, ...], float, str], ...] = (
    (("H200", "NVL"), 835.0, "H200 NVL"),
    (("H200",), 989.0, "H200 SXM"),
    (("H100", "PCIe"), 756.0, "H100 PCIe"),
    (("H100", "NVL"), 835.0, "H100 NVL"),
    (("H100",), 989.0, "H100 SXM"),
    (("A100",), 312.0, "A100"),
)


def bench_device(name: str) -> torch.device:
    """``--device``: ``auto`` is cuda when torch sees a GPU, else cpu; ``cuda`` without one is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {name}: torch {torch.__version__} sees no CUDA device")
    return torch.device(name)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU): every CUDA timing ends here."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_description(device: torch.device) -> str:
    """One line: the GPU (name, capability, memory) or CPU, torch, CUDA and cuDNN versions, TF32 setting."""
    versions = f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return (f"device: {props.name} (compute {props.major}.{props.minor}, {props.total_memory / 2**30:.0f} GiB, "
                f"{props.multi_processor_count} SMs); {versions}; fp32 matmul precision "
                f"{torch.get_float32_matmul_precision()} (TF32 {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'})")
    import platform

    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo().splitlines() if line.startswith("model name")),
                 platform.processor() or "unknown CPU")
    return f"device: CPU {model}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}; {versions}"


def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            return handle.read()
    except OSError:
        return ""


def datasheet_bf16(device: torch.device) -> str:
    """The datasheet's dense bf16 peak of this GPU, as context (``unknown`` for other devices)."""
    if device.type != "cuda":
        return "datasheet bf16 peak: not applicable (CPU)"
    name = torch.cuda.get_device_name(device)
    for parts, tflops, label in DATASHEET_BF16_TFLOPS:
        if all(part in name for part in parts):
            return (f"datasheet bf16 dense peak ({label}): {tflops:.0f} TFLOP/s (context only; the MFU below "
                    f"divides by the bf16 matmul rate measured in this run)")
    return f"datasheet bf16 peak: unknown for '{name}'"


def random_model_dir(kind: str, tokenizer_path: str, out_dir: str | os.PathLike[str], seed: int = 0) -> str:
    """Save a randomly initialised ``BertModel`` of ``RANDOM_CONFIGS[kind]`` with ``tokenizer_path``'s
    tokenizer to ``out_dir``: a local model folder every cl-bench loader takes, with no hub access.

    Raises:
        SystemExit: the tokenizer's vocabulary does not fit the config's (bert-base needs 30,522 ids).
    """
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    config = BertConfig(**RANDOM_CONFIGS[kind])
    if len(tokenizer) > config.vocab_size:
        raise SystemExit(f"--random-config {kind}: the tokenizer of {tokenizer_path} has {len(tokenizer)} ids, "
                         f"the config {config.vocab_size}")
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return str(out_dir)


def gemm_shapes(config: Any, tokens: int, large: bool = False) -> list[tuple[int, int, int]]:
    """(M, K, N) of one encoder layer's linear maps at ``tokens`` rows (Q/K/V/output, FFN up, FFN down),
    one square product of the FFN width and, with ``large`` (a GPU), 8192³, where tensor cores come
    closest to their datasheet rate: the candidates for the device's matmul peak."""
    hidden, inner = int(config.hidden_size), int(config.intermediate_size)
    shapes = [(tokens, hidden, hidden), (tokens, hidden, inner), (tokens, inner, hidden), (inner, inner, inner)]
    return shapes + ([(8192, 8192, 8192)] if large else [])


def device_gemm_peaks(device: torch.device, shapes: list[tuple[int, int, int]],
                      dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16),
                      repeats: int = 5, inner: int = 10) -> dict[str, tuple[float, tuple[int, int, int]]]:
    """Fastest ``a @ b`` rate in TFLOP/s per dtype over ``shapes`` on ``device`` (CUDA-synchronised:
    best of ``repeats`` timings of ``inner`` products after a warm-up), with the shape that reached it."""
    peaks: dict[str, tuple[float, tuple[int, int, int]]] = {}
    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.")
        best = (0.0, shapes[0])
        for m, k, n in shapes:
            a = torch.randn(m, k, device=device, dtype=dtype)
            b = torch.randn(k, n, device=device, dtype=dtype)
            a @ b
            synchronize(device)
            seconds = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(inner):
                    a @ b
                synchronize(device)
                seconds = min(seconds, (time.perf_counter() - start) / inner)
            rate = 2.0 * m * k * n / seconds / 1e12
            if rate > best[0]:
                best = (rate, (m, k, n))
        peaks[name] = best
    return peaks


def print_device_peaks(device: torch.device, config: Any, tokens: int) -> dict[str, float]:
    """Measure, print and return ``{dtype: TFLOP/s}`` of :func:`device_gemm_peaks` on the model's shapes."""
    peaks = device_gemm_peaks(device, gemm_shapes(config, tokens, large=device.type == "cuda"))
    for name, (rate, (m, k, n)) in peaks.items():
        print(f"{name} matmul peak (measured, this run): {rate:.4g} TFLOP/s at {m}x{k}x{n} on {device}", flush=True)
    print(datasheet_bf16(device), flush=True)
    return {name: rate for name, (rate, _) in peaks.items()}
