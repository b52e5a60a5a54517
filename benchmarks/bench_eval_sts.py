"""Speed of cl-bench's STS evaluation against a naive per-pair batched loop over the same model.

Both score the 7 STS tasks (STS12–16 "all", STS-B and SICK-R test) with the same encoder:

* cl-bench: ``cl_bench.eval.evaluate(tasks=["sts"])`` — every distinct sentence encoded once, in
  length-sorted batches under inference mode (it also scores the STS-B/SICK-R dev splits);
* naive: for each task, pairs in file order, batches of ``--batch-size`` pairs, both sides of every
  pair encoded (duplicates included, padding to the longest sentence of each batch), cosine,
  Spearman — what a straightforward SentEval-style loop without sorting or de-duplication does.

Prints both wall times, the speed ratio and the largest score difference over the 7 figures.

Usage::

    python benchmarks/bench_eval_sts.py --model ../shared/models/all-MiniLM-L6-v2 --pooler avg \\
        --data ../shared/data --threads 2
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from cl_bench.eval import STS_TASKS, evaluate
from cl_bench.eval.geometry import cosine_rows
from cl_bench.eval.sts import load_sts_task, spearman100
from cl_bench.models.encoder import SentenceEncoder, build_encoder


def naive_sts(encoder: SentenceEncoder, data_dir: Path, batch_size: int) -> dict[str, float]:
    """Score the 7 STS test figures pair batch by pair batch, without sorting or de-duplication."""

    @torch.no_grad()
    def embed(sentences: list[str]) -> np.ndarray:
        features = encoder.tokenize(sentences, None)
        return encoder(features).float().numpy()

    encoder.eval()
    results = {}
    for task in STS_TASKS:
        parts = load_sts_task(data_dir, task, ("test",))
        system, gold = [], []
        for pairs in parts.values():
            for start in range(0, len(pairs), batch_size):
                first = embed(list(pairs.sent1[start : start + batch_size]))
                second = embed(list(pairs.sent2[start : start + batch_size]))
                system.append(cosine_rows(first, second))
            gold.append(pairs.gold)
        results[task] = spearman100(np.concatenate(system), np.concatenate(gold))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=os.environ.get("CL_BENCH_MINILM", "../shared/models/all-MiniLM-L6-v2")
    )
    parser.add_argument("--pooler", default="avg")
    parser.add_argument("--data", default=os.environ.get("CL_BENCH_DATA", "../shared/data"))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    encoder = build_encoder(args.model, pooler=args.pooler, fresh_mlp=False)
    data_dir = Path(args.data)
    for task in STS_TASKS:  # parse once up front so neither timing includes file reading
        load_sts_task(data_dir, task, ("dev", "test"))

    start = time.perf_counter()
    ours = evaluate(
        encoder, data_dir, tasks=["sts"], batch_size=args.batch_size, align_uniform=False, anisotropy=False
    )
    ours_s = time.perf_counter() - start
    print(f"cl-bench evaluate(tasks=[sts]): {ours_s:.1f} s", flush=True)
    start = time.perf_counter()
    naive = naive_sts(encoder, data_dir, args.batch_size)
    naive_s = time.perf_counter() - start

    diffs = {task: abs(ours[task] - naive[task]) for task in STS_TASKS}
    print(f"model {args.model} pooler={args.pooler} threads={args.threads} batch={args.batch_size}")
    print(f"{'task':8s} {'cl-bench':>9s} {'naive':>9s}")
    for task in STS_TASKS:
        print(f"{task:8s} {ours[task]:9.3f} {naive[task]:9.3f}")
    print(f"cl-bench: {ours_s:.1f} s   naive: {naive_s:.1f} s   speed-up: {naive_s / ours_s:.2f}x")
    print(f"max |score difference|: {max(diffs.values()):.4f} ({max(diffs, key=diffs.get)})")


if __name__ == "__main__":
    main()
