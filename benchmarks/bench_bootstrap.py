"""Speed of ``cl-bench-report --compare``'s paired bootstrap: the vectorised statistic against the per-resample loop.

Both columns run ``scipy.stats.bootstrap`` (paired, percentile, the same seed) on the same input: one run a
side (``--seeds`` more) scored on the seven STS test tasks at their real sizes (STS12–16 with their
sub-datasets, STS-B and SICK-R test: 18,850 pairs), synthetic similarities, gold scores on STS's 0.2 grid
(ties, as the real gold has), aggregation ``all``.

* loop: what ``cl_bench.reporting.significance.paired_bootstrap`` did before issue 39's follow-up, the statistic one
  resample at a time (``vectorized=False``; per task the average ranks of the resampled arrays);
* vectorised: ``paired_bootstrap`` now (:class:`cl_bench.reporting.significance._ResampledSpearman`, batches of
  resamples as pair counts).

The loop is timed on ``--loop-resamples`` (its time grows linearly with the resamples; the figure scaled to
``--resamples`` is printed as such), the vectorised statistic on ``--resamples``. With one seed both draw
the same resamples, so the first ``--loop-resamples`` of the two bootstrap distributions are compared
(largest absolute difference printed; the test suite checks they are equal to 1e-9).

Prints the CPU model, its flags and the load average, then each column's wall and process CPU time.

Usage::

    python benchmarks/bench_bootstrap.py [--resamples 10000] [--loop-resamples 200] [--seeds 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import print_machine
from scipy.stats import bootstrap

from cl_bench.eval.pair_scores import PairScores
from cl_bench.reporting.significance import BOOTSTRAP_BATCH, _figures, _flatten, _ResampledSpearman

#: the STS test tasks' sub-datasets and their pair counts (SentEval's files; STS-B and SICK-R test one part each)
REAL_SIZES: dict[str, dict[str, int]] = {
    "sts12": {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "surprise.OnWN": 750, "surprise.SMTnews": 399},
    "sts13": {"FNWN": 189, "headlines": 750, "OnWN": 561},
    "sts14": {"deft-forum": 450, "deft-news": 300, "headlines": 750, "images": 750, "OnWN": 750, "tweet-news": 750},
    "sts15": {"answers-forums": 375, "answers-students": 750, "belief": 375, "headlines": 750, "images": 750},
    "sts16": {"answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244, "question-question": 209},
    "stsb": {"test": 1379},
    "sickr": {"test": 4927},
}


def real_size_gold(rng: np.random.Generator) -> dict[str, dict[str, np.ndarray]]:
    """Gold scores of the real tasks' sizes, on a 0.2 grid from 0 to 5 (ties, as STS's gold has)."""
    return {t: {p: np.round(rng.uniform(0, 5, n) * 5) / 5 for p, n in parts.items()} for t, parts in REAL_SIZES.items()}


def synthetic_runs(gold: dict[str, dict[str, np.ndarray]], seeds: int, noise: float,
                   rng: np.random.Generator) -> list[PairScores]:
    """``seeds`` runs scored on the pairs of ``gold``: similarity = gold + normal noise of sd ``noise``."""
    return [{t: {p: (g + rng.normal(0, noise, len(g)), g) for p, g in parts.items()} for t, parts in gold.items()}
            for _ in range(seeds)]


def timed(function):  # noqa: ANN001, ANN201 (a callable and its result)
    """``function()``'s result, wall seconds and process CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    """Time both columns and print them."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resamples", type=int, default=10_000, help="resamples of the vectorised column")
    parser.add_argument("--loop-resamples", type=int, default=200, help="resamples of the loop column")
    parser.add_argument("--seeds", type=int, default=1, help="runs (seeds) a side")
    parser.add_argument("--seed", type=int, default=0, help="the resampling seed")
    args = parser.parse_args()
    print_machine()

    rng = np.random.default_rng(1)
    gold = real_size_gold(rng)
    a, b = synthetic_runs(gold, args.seeds, 1.0, rng), synthetic_runs(gold, args.seeds, 1.1, rng)
    tasks = list(REAL_SIZES)
    flat = _flatten(a, b, tasks)
    n_a = len(flat.a)
    print(f"input: {len(tasks)} tasks, {len(flat.gold)} pairs, {args.seeds} seed(s) a side, aggregation all")

    def loop_statistic(group: np.ndarray, gold: np.ndarray, *systems: np.ndarray) -> np.ndarray:
        diff = _figures(flat, group, gold, systems[:n_a], "all") - _figures(flat, group, gold, systems[n_a:], "all")
        return np.append(diff, diff.mean())

    loop, loop_wall, loop_cpu = timed(lambda: bootstrap(
        (flat.group, flat.gold, *flat.a, *flat.b), loop_statistic, paired=True, vectorized=False,
        n_resamples=args.loop_resamples, method="percentile", rng=np.random.default_rng(args.seed)))
    fast, fast_wall, fast_cpu = timed(lambda: bootstrap(
        (np.arange(len(flat.gold)),), _ResampledSpearman(flat, "all"), paired=True, vectorized=True,
        n_resamples=args.resamples, batch=BOOTSTRAP_BATCH, method="percentile", rng=np.random.default_rng(args.seed)))
    shared = min(args.loop_resamples, args.resamples)
    gap = np.nanmax(np.abs(loop.bootstrap_distribution[:, :shared] - fast.bootstrap_distribution[:, :shared]))
    scaled = loop_wall * args.resamples / args.loop_resamples
    print(f"loop:       {args.loop_resamples} resamples in {loop_wall:.2f} s wall, {loop_cpu:.2f} s CPU "
          f"({loop_wall / args.loop_resamples * 1e3:.1f} ms a resample; {args.resamples} resamples ≈ {scaled:.0f} s)")
    print(f"vectorised: {args.resamples} resamples in {fast_wall:.2f} s wall, {fast_cpu:.2f} s CPU "
          f"({fast_wall / args.resamples * 1e3:.2f} ms a resample; batches of {BOOTSTRAP_BATCH})")
    print(f"speed-up a resample: {scaled / fast_wall:.0f}x; largest difference over the first {shared} resamples "
          f"of the two distributions: {gap:.2e}")
    print(f"avg row, vectorised: 95% CI [{fast.confidence_interval.low[-1]:+.3f}, {fast.confidence_interval.high[-1]:+.3f}]")


if __name__ == "__main__":
    main()
