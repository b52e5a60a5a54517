"""SentEval transfer suite (7 tasks) for one encoder: encoding time, then SentEval's classifier
trained in batches (cl-bench's default) and one model at a time (the same algorithm as SentEval's
loop), their time ratio and the largest |difference| between their figures; optionally the
scikit-learn approximation's distance from SentEval's figures.

It runs what ``evaluate(tasks=["transfer"])`` runs — one ``encode`` call over every distinct sentence,
then each task's protocol — but times the phases apart (wall and CPU; CPU time is the robust figure
on a shared machine). ``--backend`` picks the encoding backend as ``eval.backend`` does (default
``auto``: what a run uses on this machine); ``--compare-backend`` also encodes with the other backend
and runs the batched classifier on its embeddings, printing the largest |difference| of every figure
between the two backends.

Usage::

    python benchmarks/bench_transfer.py --model ../shared/models/all-MiniLM-L6-v2 --pooler avg \\
        --data ../shared/data --config full --threads 2 [--tasks trec cr] [--no-reference] [--sklearn] \\
        [--backend auto|torch|onnx] [--compare-backend]
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from _common import BatchShapes, encoder_flops, encoder_parser, load_encoder, measure_peaks, rates

from cl_bench.eval import format_table, groups
from cl_bench.eval.embed import EmbeddingTable
from cl_bench.eval.options import TRANSFER_CONFIGS
from cl_bench.eval.registry import task_sentences
from cl_bench.eval.transfer import load_transfer_task, run_transfer_task
from cl_bench.models.encoding_options import BACKENDS
from cl_bench.models.inference import EncodingSettings, encoding


def _timed(
    function: Callable[..., dict[str, float]], *args: object, **kwargs: object
) -> tuple[dict[str, float], float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _machine() -> str:
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    wanted = ("Model name", "CPU(s)", "Flags")
    lines = [line for line in lscpu.splitlines() if line.split(":")[0].strip() in wanted]
    flags = [flag for line in lines if line.startswith("Flags") for flag in line.split()[1:]]
    simd = " ".join(f for f in flags if f.startswith(("avx", "amx", "fma")))
    head = " | ".join(" ".join(line.split()) for line in lines if not line.startswith("Flags"))
    return f"{head} | {simd}"


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"


def main() -> None:
    parser = encoder_parser(__doc__)
    parser.add_argument("--config", choices=sorted(TRANSFER_CONFIGS), default="full")
    parser.add_argument("--tasks", nargs="+", default=list(groups()["transfer"]), choices=groups()["transfer"])
    parser.add_argument("--no-reference", action="store_true", help="skip the one-model-at-a-time run")
    parser.add_argument("--sklearn", action="store_true", help="also run the scikit-learn approximation")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="encoding backend (eval.backend)")
    parser.add_argument("--compare-backend", action="store_true",
                        help="also encode with the other backend and compare the batched classifier's figures")
    args = parser.parse_args()
    print(_machine(), f"| torch threads {args.threads} | load average at start {_load()}", flush=True)
    peaks = measure_peaks(args.threads)  # bench_gemm.py's shapes, this run: what encoding is measured against
    encoder = load_encoder(args)
    data = {task: load_transfer_task(Path(args.data), task) for task in args.tasks}
    sentences = [text for parts in data.values() for text in task_sentences(parts)]
    settings = EncodingSettings(args.backend, "fp32")
    with encoding(settings):
        # outside the timing: any ONNX export, and auto's once-per-machine measurement (remembered in the cache)
        encoder.encode(sentences[:: max(1, len(sentences) // 512)], batch_size=args.batch_size)
        (backend,) = settings.backends_used
        shapes = BatchShapes(encoder)  # the padded batches actually run: their FLOPs
        encode_cpu = time.process_time()
        table = EmbeddingTable(encoder, sentences, args.batch_size)
        encode_cpu = time.process_time() - encode_cpu
    print(f"encoding ({args.backend} -> {backend}): {len(table)} distinct sentences: "
          f"{table.seconds:.1f} s wall, {encode_cpu:.1f} s CPU; "
          f"{rates(table.seconds, encode_cpu, encoder_flops(encoder.backbone.config, shapes.batches), peaks)}", flush=True)

    runs = {"batched": {"batched": True}}
    if not args.no_reference:
        runs["one-at-a-time"] = {"batched": False}
    if args.sklearn:
        runs["sklearn"] = {"classifier": "sklearn"}
    results: dict[str, dict[str, float]] = {name: {} for name in runs}
    seconds = {name: [0.0, 0.0] for name in runs}
    for task, parts in data.items():
        for name, options in runs.items():
            scores, wall, cpu = _timed(run_transfer_task, task, parts, table, args.config, **options)
            results[name].update(scores)
            seconds[name][0] += wall
            seconds[name][1] += cpu
            figures = "  ".join(f"{key} {value:6.2f}" for key, value in scores.items())
            print(f"{task:5s} {name:13s} {figures}   {wall:7.1f} s wall {cpu:7.1f} s CPU", flush=True)
    print(format_table(results["batched"]))
    for name in runs:
        wall, cpu = seconds[name]
        print(f"classifier {name:13s}: {wall:8.1f} s wall {cpu:8.1f} s CPU")
    if "one-at-a-time" in runs:
        reference = results["one-at-a-time"]
        difference = max(abs(results["batched"][key] - reference[key]) for key in reference)
        wall_ratio = seconds["one-at-a-time"][0] / seconds["batched"][0]
        cpu_ratio = seconds["one-at-a-time"][1] / seconds["batched"][1]
        print(f"one-at-a-time / batched: {wall_ratio:.1f}x wall, {cpu_ratio:.1f}x CPU; "
              f"largest |difference| {difference:.2f}")
    if "sklearn" in runs:
        for key, value in results["batched"].items():
            print(f"sklearn - SentEval {key:10s}: {results['sklearn'][key] - value:+6.2f}")
    if args.compare_backend:
        other_backend = "torch" if backend == "onnx" else "onnx"
        with encoding(EncodingSettings(other_backend, "fp32")):
            other_table = EmbeddingTable(encoder, sentences, args.batch_size)
        print(f"encoding ({other_backend}): {other_table.seconds:.1f} s wall", flush=True)
        other: dict[str, float] = {}
        for task, parts in data.items():
            other.update(run_transfer_task(task, parts, other_table, args.config, batched=True))
        for key, value in results["batched"].items():
            print(f"{other_backend} - {backend} {key:10s}: {other[key] - value:+6.2f}")
        difference = max(abs(other[key] - results["batched"][key]) for key in other)
        print(f"largest |difference| {backend} vs {other_backend}: {difference:.2f}")
    print(
        f"config={args.config} tasks={' '.join(args.tasks)} load average at end {_load()}\n"
        f"wall: encoding {table.seconds:.1f} s + batched classifiers {seconds['batched'][0]:.1f} s "
        f"= {table.seconds + seconds['batched'][0]:.1f} s"
    )


if __name__ == "__main__":
    main()
