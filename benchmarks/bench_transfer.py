"""Wall and CPU time of the full SentEval transfer suite (7 tasks) for one encoder, split into
encoding and classifier time per task (CPU time is the robust figure on a shared machine).

It runs exactly what ``evaluate(tasks=["transfer"])`` runs — one ``encode`` call over every distinct
sentence of the seven tasks, then each task's classifier protocol — but times the phases apart.

Usage::

    python benchmarks/bench_transfer.py --model ../shared/models/all-MiniLM-L6-v2 --pooler avg \\
        --data ../shared/data --config full --threads 2
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from _common import encoder_parser, load_encoder

from cl_bench.eval import TRANSFER_TASKS, format_table
from cl_bench.eval.embed import EmbeddingTable
from cl_bench.eval.tasks import TRANSFER_CONFIGS
from cl_bench.eval.transfer import load_transfer_task, run_transfer_task, task_sentences


def main() -> None:
    parser = encoder_parser(__doc__)
    parser.add_argument("--config", choices=sorted(TRANSFER_CONFIGS), default="full")
    parser.add_argument("--tasks", nargs="+", default=list(TRANSFER_TASKS), choices=TRANSFER_TASKS)
    args = parser.parse_args()
    encoder = load_encoder(args)
    total_wall, total_cpu = time.perf_counter(), time.process_time()
    data = {task: load_transfer_task(Path(args.data), task) for task in args.tasks}
    sentences = [text for parts in data.values() for text in task_sentences(parts)]
    encode_cpu = time.process_time()
    table = EmbeddingTable(encoder, sentences, args.batch_size)
    encode_cpu = time.process_time() - encode_cpu
    print(
        f"encoding: {len(table)} distinct sentences ({len(sentences)} with repeats): "
        f"{table.seconds:.1f} s wall, {encode_cpu:.1f} s CPU",
        flush=True,
    )

    results: dict[str, float] = {}
    classifier_wall = classifier_cpu = 0.0
    for task, parts in data.items():
        wall, cpu = time.perf_counter(), time.process_time()
        results.update(run_transfer_task(task, parts, table, kfold=TRANSFER_CONFIGS[args.config]))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        classifier_wall += wall
        classifier_cpu += cpu
        print(
            f"{task:5s} acc {results[task]:6.2f}  devacc {results[task + '_dev']:6.2f}  "
            f"classifier {wall:6.1f} s wall, {cpu:6.1f} s CPU",
            flush=True,
        )
    if len(data) == len(TRANSFER_TASKS):
        results["transfer_avg"] = float(np.mean([results[task] for task in TRANSFER_TASKS]))
    print(format_table(results))
    total_wall, total_cpu = time.perf_counter() - total_wall, time.process_time() - total_cpu
    print(
        f"config={args.config} threads={args.threads}\n"
        f"wall: encoding {table.seconds:.1f} s + classifiers {classifier_wall:.1f} s = total {total_wall:.1f} s\n"
        f"CPU:  encoding {encode_cpu:.1f} s + classifiers {classifier_cpu:.1f} s = total {total_cpu:.1f} s"
    )


if __name__ == "__main__":
    main()
