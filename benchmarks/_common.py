"""Command-line options and set-up shared by the evaluation benchmarks."""

from __future__ import annotations

import argparse
import os

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
