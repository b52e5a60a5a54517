"""Speed of cl-bench's STS evaluation against a naive per-pair batched loop over the same model.

Both compute the same 9 figures with the same encoder — the 7 STS test figures (STS12–16 "all",
STS-B and SICK-R test) and the STS-B and SICK-R dev figures that ``evaluate(tasks=["sts"])`` also
reports:

* cl-bench: ``cl_bench.eval.evaluate(tasks=["sts"])`` — every distinct sentence encoded once, in
  length-sorted batches under inference mode;
* naive: for each task and split, pairs in file order, batches of ``--batch-size`` pairs, both sides
  of every pair encoded (duplicates included, padding to the longest sentence of each batch), cosine,
  Spearman — what a straightforward SentEval-style loop without sorting or de-duplication does.

One warm-up batch runs before either is timed, so neither pays for the thread pool's start.

Prints, for both, the wall time, the process CPU time (robust to other load on a shared machine)
and the tokens the model processed (padding included: the work itself), the speed ratios and the
largest score difference over the 9 figures.

Usage::

    python benchmarks/bench_eval_sts.py --model ../shared/models/all-MiniLM-L6-v2 --pooler avg \\
        --data ../shared/data --threads 2
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import encoder_parser, load_encoder

from cl_bench.eval import STS_TASKS, evaluate
from cl_bench.eval.geometry import cosine_rows
from cl_bench.eval.sts import load_sts_task, spearman100
from cl_bench.models.encoder import SentenceEncoder

DEV_TASKS = ("stsb", "sickr")  # the STS tasks with a dev split


class TokenCounter:
    """Wraps ``encoder.forward`` to count the (padded) tokens fed to the model."""

    def __init__(self, encoder: SentenceEncoder) -> None:
        self.tokens = 0
        self._forward = encoder.forward
        encoder.forward = self  # type: ignore[method-assign]

    def __call__(self, features: dict[str, torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
        self.tokens += int(features["input_ids"].numel())
        return self._forward(features, *args, **kwargs)


def naive_sts(encoder: SentenceEncoder, data_dir: Path, batch_size: int) -> dict[str, float]:
    """Score the 7 STS test and 2 dev figures pair batch by pair batch, without sorting or de-duplication."""

    @torch.no_grad()
    def embed(sentences: list[str]) -> np.ndarray:
        features = encoder.tokenize(sentences, None)
        return encoder(features).float().numpy()

    def score(parts: list) -> float:
        system, gold = [], []
        for pairs in parts:
            for start in range(0, len(pairs), batch_size):
                first = embed(list(pairs.sent1[start : start + batch_size]))
                second = embed(list(pairs.sent2[start : start + batch_size]))
                system.append(cosine_rows(first, second))
            gold.append(pairs.gold)
        return spearman100(np.concatenate(system), np.concatenate(gold))

    encoder.eval()
    results = {}
    for task in STS_TASKS:
        if task in DEV_TASKS:
            for split, name in (("test", task), ("dev", f"{task}_dev")):
                results[name] = score(list(load_sts_task(data_dir, task, (split,)).values()))
        else:  # STS12–16 "all": every sub-dataset's pairs in one Spearman
            results[task] = score(list(load_sts_task(data_dir, task).values()))
    return results


def timed(function, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
    """``(result, wall seconds, process CPU seconds)`` of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    args = encoder_parser(__doc__).parse_args()
    encoder = load_encoder(args)
    data_dir = Path(args.data)
    for task in STS_TASKS:  # parse once up front so neither timing includes file reading
        load_sts_task(data_dir, task, ("dev", "test"))
    encoder.encode(["a warm-up sentence."] * 8, batch_size=8)
    counter = TokenCounter(encoder)

    ours, ours_s, ours_cpu = timed(
        evaluate,
        encoder,
        data_dir,
        tasks=["sts"],
        batch_size=args.batch_size,
        align_uniform=False,
        anisotropy=False,
    )
    ours_tokens, counter.tokens = counter.tokens, 0
    print(f"cl-bench evaluate(tasks=[sts]): {ours_s:.1f} s wall, {ours_cpu:.1f} s CPU", flush=True)
    naive, naive_s, naive_cpu = timed(naive_sts, encoder, data_dir, args.batch_size)
    naive_tokens = counter.tokens

    diffs = {name: abs(ours[name] - naive[name]) for name in naive}
    print(f"model {args.model} pooler={args.pooler} threads={args.threads} batch={args.batch_size}")
    print(f"{'figure':10s} {'cl-bench':>9s} {'naive':>9s}")
    for name in naive:
        print(f"{name:10s} {ours[name]:9.3f} {naive[name]:9.3f}")
    print(f"wall   cl-bench: {ours_s:8.1f} s   naive: {naive_s:8.1f} s   speed-up: {naive_s / ours_s:.2f}x")
    print(
        f"CPU    cl-bench: {ours_cpu:8.1f} s   naive: {naive_cpu:8.1f} s   speed-up: {naive_cpu / ours_cpu:.2f}x"
    )
    print(
        f"tokens cl-bench: {ours_tokens:10d}   naive: {naive_tokens:10d}   ratio: {naive_tokens / ours_tokens:.2f}x"
    )
    print(f"max |score difference|: {max(diffs.values()):.4f} ({max(diffs, key=diffs.get)})")


if __name__ == "__main__":
    main()
