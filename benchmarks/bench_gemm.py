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

import torch
from _common import SHAPES, gflops, onnx_matmul
from bench_eval_sts import cpu_description

from cl_bench.models.inference import onnxruntime_available


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
