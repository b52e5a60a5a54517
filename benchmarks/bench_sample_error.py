"""The sampling error of ``eval=iterate``'s STS-B figures: a real model's STS-B test Spearman on every pair and on the
fixed sample of ``eval.sample_pairs`` pairs, and how far a sample of that size strays (issue 50).

    python benchmarks/bench_sample_error.py --model ../shared/models/all-MiniLM-L6-v2 --pooler avg

Encodes STS-B test (and dev) once and prints, per split: the full figure, the fixed sample's figure
(:func:`cl_bench.eval.suite.sampled_pairs`, what ``eval=iterate`` scores), the bootstrap standard error of Spearman at
n = ``--sample-pairs`` (``--resamples`` resamples with replacement of the fixed sample's pairs) and the spread of the
figure over random samples of that size drawn without replacement from the split (its standard deviation: the
error of "a sample of n instead of every pair").
"""

from __future__ import annotations

import numpy as np
from _common import encoder_parser, load_encoder, print_machine
from scipy.stats import spearmanr

from cl_bench.eval.registry import load_task
from cl_bench.eval.suite import sample_rows


def main() -> None:
    parser = encoder_parser(__doc__)
    parser.add_argument("--sample-pairs", type=int, default=300)
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    encoder = load_encoder(args)
    print_machine()
    rng = np.random.default_rng(0)
    for split in ("test", "dev"):
        pairs = load_task(args.data, "stsb", (split,))[split]
        a = encoder.encode(list(pairs.sent1), args.batch_size)
        b = encoder.encode(list(pairs.sent2), args.batch_size)
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        gold = np.asarray(pairs.gold)
        full = 100 * spearmanr(cos, gold)[0]
        rows = sample_rows(len(gold), args.sample_pairs)  # eval=iterate's pairs (sampled_pairs)
        n = len(rows)
        fixed = 100 * spearmanr(cos[rows], gold[rows])[0]
        boot = [100 * spearmanr(cos[r], gold[r])[0] for r in (rows[rng.integers(0, n, n)] for _ in range(args.resamples))]
        draws = [100 * spearmanr(cos[r], gold[r])[0]
                 for r in (rng.choice(len(gold), n, replace=False) for _ in range(args.resamples))]
        print(f"STS-B {split}: {len(gold)} pairs, Spearman x100 {full:.2f}; fixed sample of {n}: {fixed:.2f} "
              f"({fixed - full:+.2f}); bootstrap SE at n={n}: {np.std(boot, ddof=1):.2f}; SD over random {n}-pair "
              f"samples: {np.std(draws, ddof=1):.2f} (mean {np.mean(draws):.2f})")


if __name__ == "__main__":
    main()
