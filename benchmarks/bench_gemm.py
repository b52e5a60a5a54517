"""Matrix-product throughput of this CPU per library and precision: what the encoders can reach.

Times C = A @ B for the three shapes of a MiniLM/BERT layer's linear maps (M = batch x tokens rows)
with torch fp32 (MKL/oneDNN), NumPy fp32 (its BLAS, OpenBLAS in the PyPI wheel), torch bf16 (oneDNN:
AVX512_BF16/AMX where present) and ONNX Runtime fp32 (a one-MatMul graph, MLAS), and prints GFLOP/s,
best of ``--repeats``, with the CPU model and flags. Read it beside ``bench_eval_sts.py``: how close
each backend's encoder gets to what its matrix products can do on this machine.

Usage::

    python benchmarks/bench_gemm.py --threads 2
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
from bench_eval_sts import cpu_description

from cl_bench.models.inference import onnxruntime_available

#: (M, K, N): attention projections (384x384), FFN up (384x1536) and down (1536x384) at M = 4096 tokens.
SHAPES: tuple[tuple[int, int, int], ...] = ((4096, 384, 384), (4096, 384, 1536), (4096, 1536, 384))


def gflops(function: Callable[[], object], flops: float, repeats: int, inner: int = 10) -> float:
    """Best GFLOP/s over ``repeats`` timings of ``inner`` calls (after one warm-up call)."""
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            function()
        best = min(best, (time.perf_counter() - start) / inner)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(cpu_description())
    print(f"threads={args.threads}; GFLOP/s, best of {args.repeats}")
    print(f"{'M x K x N':>18s} {'torch fp32':>11s} {'NumPy fp32':>11s} {'ORT fp32':>9s} {'torch bf16':>11s}")
    for m, k, n in SHAPES:
        a, b = torch.randn(m, k), torch.randn(k, n)
        a_np, b_np = a.numpy(), b.numpy()
        a_bf, b_bf = a.bfloat16(), b.bfloat16()
        flops = 2.0 * m * k * n
        row = [
            gflops(lambda a=a, b=b: a @ b, flops, args.repeats),
            gflops(lambda a=a_np, b=b_np: a @ b, flops, args.repeats),
        ]
        if onnxruntime_available():
            run = onnx_matmul(b_np, args.threads)
            row.append(gflops(lambda run=run, a=a_np: run(a), flops, args.repeats))
        else:
            row.append(float("nan"))
        row.append(gflops(lambda a=a_bf, b=b_bf: a @ b, flops, args.repeats))
        print(f"{f'{m}x{k}x{n}':>18s} " + " ".join(f"{value:10.0f} " for value in row))
    print(cpu_description())


if __name__ == "__main__":
    main()
