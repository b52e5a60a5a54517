"""Where cl-bench's SimCSE training step spends its time on a CPU, fp32 against bf16 autocast: a torch.profiler
breakdown by op (self CPU time), with the step's matrix-multiply FLOPs against the machine's measured GEMM peak.

    python benchmarks/profile_train_step.py --model ../shared/models/all-MiniLM-L6-v2 \
        --corpus ../shared/data/corpus/wiki1m_for_simcse.head.txt --batch-size 32 --max-length 32

The step is ``bench_precision.py``'s (the Trainer's helpers: SimCSE, dropout views, InfoNCE, AdamW, clipping), on
batches of ``--batch-size`` sentences cut to ``--max-length`` tokens (the ``--shapes 32x32`` of
``bench_train_step.py``); ``--steps`` profiled steps after ``--warmup`` untimed ones. Prints, per precision, the
median step time, the ops taking most of the self CPU time (and their share), the step's GEMM FLOPs (profiler
``with_flops``) as a share of the peak ``bench_gemm.py`` measures for that dtype.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _common import SHAPES, gflops, print_machine
from bench_precision import step_fn
from torch.profiler import ProfilerActivity, profile

from cl_bench.data.text import read_sentences


def gemm_peak(dtype: torch.dtype) -> float:
    """Best GFLOP/s of torch.matmul on the encoder's shapes in ``dtype`` (bf16: the AVX512_BF16/AMX kernels)."""
    best = 0.0
    for m, k, n in SHAPES:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        best = max(best, gflops(lambda a=a, b=b: a @ b, 2.0 * m * k * n, repeats=3, inner=3))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    needed = args.batch_size * (args.steps + args.warmup)
    # cut to --max-length tokens as the shapes option of bench_train_step.py does: whole words, a word ~ a token
    sentences = [" ".join(s.split()[: args.max_length - 2]) for s in read_sentences(args.corpus, limit=needed)]
    batches = [sentences[i : i + args.batch_size] for i in range(0, needed, args.batch_size)]
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        step = step_fn(args.model, precision, False)
        for batch in batches[: args.warmup]:
            step(batch)
        times = []
        with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
            for batch in batches[args.warmup :]:
                started = time.perf_counter()
                step(batch)
                times.append(time.perf_counter() - started)
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events)
        flops = sum(e.flops for e in events) / args.steps
        median = statistics.median(times)
        peak = gemm_peak(dtype)
        print(f"\n{precision}: median step {1e3 * median:.0f} ms; matmul FLOPs/step {flops / 1e9:.1f} G -> "
              f"{flops / median / 1e9:.0f} GFLOP/s = {100 * flops / median / 1e9 / peak:.1f}% of the measured "
              f"{dtype} GEMM peak ({peak:.0f} GFLOP/s)")
        print(f"{'op':<42} {'self CPU ms/step':>16} {'share':>7}")
        for event in sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.top]:
            ms = event.self_cpu_time_total / 1e3 / args.steps
            print(f"{event.key[:42]:<42} {ms:16.1f} {100 * event.self_cpu_time_total / total:6.1f}%")


if __name__ == "__main__":
    main()
