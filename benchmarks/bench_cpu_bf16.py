"""The dev figures of a real model in fp32 and under CPU bf16 autocast, side by side: what
``eval.precision=auto`` / ``train.precision=auto`` rest on when iterating on a CPU with bf16 units (issue 50).

    python benchmarks/bench_cpu_bf16.py --model ../shared/models/all-MiniLM-L6-v2 --pooler avg

Encodes the in-training dev evaluation's sets (STS-B dev, SICK-R dev; ``evaluate_dev``) with the torch backend,
once in fp32 and once in bf16 (``eval.precision=bf16``: one autocast block around the batches, as evaluation
runs), on every pair and on the fixed sample of ``eval=iterate`` (``--sample-pairs``, default 300), and prints
each figure, the bf16 - fp32 difference and the encoding time of each. The rule it decides
(:data:`cl_bench.models.inference.AUTO_MAX_STS_DELTA`): bf16 for iterating when every |difference| <= 0.05.
"""

from __future__ import annotations

import time

from _common import encoder_parser, load_encoder, print_machine

from cl_bench.eval.suite import evaluate_dev
from cl_bench.models.inference import AUTO_MAX_STS_DELTA, EncodingSettings, encoding

KEYS = ("stsb_dev", "sickr_dev", "sts_dev_avg")


def main() -> None:
    parser = encoder_parser(__doc__)
    parser.add_argument("--sample-pairs", type=int, default=300)
    args = parser.parse_args()
    encoder = load_encoder(args)
    print_machine()
    rows = []
    for sample in (None, args.sample_pairs):
        figures = {}
        for precision in ("fp32", "bf16"):
            started = time.perf_counter()
            with encoding(EncodingSettings("torch", precision)):
                scores = evaluate_dev(encoder, args.data, "stsb_dev", args.batch_size, align_uniform=False,
                                      anisotropy=False, sample_pairs=sample)
            figures[precision] = (scores, time.perf_counter() - started)
        rows.append((sample, figures))
    print(f"{'pairs':>8} {'metric':>12} {'fp32':>8} {'bf16':>8} {'bf16-fp32':>10}")
    worst = 0.0
    for sample, figures in rows:
        for key in KEYS:
            fp32, bf16 = figures["fp32"][0][key], figures["bf16"][0][key]
            worst = max(worst, abs(bf16 - fp32))
            print(f"{sample or 'all':>8} {key:>12} {fp32:8.2f} {bf16:8.2f} {bf16 - fp32:+10.3f}")
        print(f"{sample or 'all':>8} {'seconds':>12} {figures['fp32'][1]:8.1f} {figures['bf16'][1]:8.1f}")
    verdict = "bf16" if worst <= AUTO_MAX_STS_DELTA else "fp32"
    print(f"largest |bf16 - fp32| = {worst:.3f} (limit {AUTO_MAX_STS_DELTA}): auto picks {verdict} for iterating")


if __name__ == "__main__":
    main()
