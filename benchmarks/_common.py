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
