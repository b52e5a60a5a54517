"""Wall time of the full SentEval transfer suite (7 tasks) for one encoder, split into encoding and
classifier time per task.

It runs exactly what ``evaluate(tasks=["transfer"])`` runs — one ``encode`` call over every distinct
sentence of the seven tasks, then each task's classifier protocol — but times the phases apart.

Usage::

    python benchmarks/bench_transfer.py --model ../shared/models/all-MiniLM-L6-v2 --pooler avg \\
        --data ../shared/data --config full --threads 2
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from cl_bench.eval import TRANSFER_TASKS, format_table
from cl_bench.eval.embed import EmbeddingTable
from cl_bench.eval.tasks import TRANSFER_CONFIGS
from cl_bench.eval.transfer import load_transfer_task, run_transfer_task, task_sentences
from cl_bench.models.encoder import build_encoder


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=os.environ.get("CL_BENCH_MINILM", "../shared/models/all-MiniLM-L6-v2")
    )
    parser.add_argument("--pooler", default="avg")
    parser.add_argument("--data", default=os.environ.get("CL_BENCH_DATA", "../shared/data"))
    parser.add_argument("--config", choices=sorted(TRANSFER_CONFIGS), default="full")
    parser.add_argument("--tasks", nargs="+", default=list(TRANSFER_TASKS), choices=TRANSFER_TASKS)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    encoder = build_encoder(args.model, pooler=args.pooler, fresh_mlp=False)
    total_start = time.perf_counter()
    data = {task: load_transfer_task(Path(args.data), task) for task in args.tasks}
    sentences = [text for parts in data.values() for text in task_sentences(parts)]
    table = EmbeddingTable(encoder, sentences, args.batch_size)
    print(
        f"encoding: {len(table)} distinct sentences ({len(sentences)} with repeats) in {table.seconds:.1f} s"
    )

    results: dict[str, float] = {}
    classifier_s = 0.0
    for task, parts in data.items():
        start = time.perf_counter()
        results.update(run_transfer_task(task, parts, table, kfold=TRANSFER_CONFIGS[args.config]))
        seconds = time.perf_counter() - start
        classifier_s += seconds
        print(
            f"{task:5s} acc {results[task]:6.2f}  devacc {results[task + '_dev']:6.2f}  classifier {seconds:6.1f} s"
        )
    if len(data) == len(TRANSFER_TASKS):
        results["transfer_avg"] = float(np.mean([results[task] for task in TRANSFER_TASKS]))
    print(format_table(results))
    total_s = time.perf_counter() - total_start
    print(
        f"config={args.config} threads={args.threads}: encoding {table.seconds:.1f} s + classifiers "
        f"{classifier_s:.1f} s = total {total_s:.1f} s"
    )


if __name__ == "__main__":
    main()
