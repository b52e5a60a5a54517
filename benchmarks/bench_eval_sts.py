"""Speed of cl-bench's STS evaluation per backend and precision, and against a naive per-pair loop.

Every column computes the same 9 figures with the same encoder — the 7 STS test figures (STS12–16
"all", STS-B and SICK-R test) and the STS-B and SICK-R dev figures that ``evaluate(tasks=["sts"])``
also reports:

* torch fp32 (the reference): ``evaluate(encoder, data, ["sts"], EvalOptions(backend="torch"))`` — every distinct sentence
  encoded once, in length-sorted batches under inference mode;
* ONNX Runtime fp32: the same with ``backend="onnx"`` (the export is made before timing and reported);
* torch bf16: the same with ``precision="bf16"`` (autocast), where the CPU has avx512_bf16/amx_bf16;
* naive: for each task and split, pairs in file order, batches of ``--batch-size`` pairs, both sides
  of every pair encoded (duplicates included, padding to the longest sentence of each batch), cosine,
  Spearman — what a straightforward SentEval-style loop without sorting or de-duplication does.

One warm-up batch runs before either is timed, so neither pays for the thread pool's start.

Prints the CPU model, its bf16/AVX-512 flags and the load average, then per column the wall time,
the process CPU time, the ratio to torch fp32 and the largest score difference to it over the 9
figures (``--tasks`` times a subset); for torch fp32 and naive also the tokens the model processed (padding included). The
embedding cache is off for every column. ``--transfer`` adds the encoding of every distinct sentence
of the 7 transfer tasks (MR … MRPC, what ``tasks=[transfer]`` encodes) per backend.
``benchmarks/bench_gemm.py`` gives the matrix-product throughput these figures can be read against.

Usage::

    python benchmarks/bench_eval_sts.py --model ../shared/models/all-MiniLM-L6-v2 --pooler avg \\
        --data ../shared/data --threads 2 [--transfer] [--no-naive]
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import (
    BatchShapes,
    encoder_flops,
    encoder_parser,
    load_encoder,
    measure_peaks,
    profile_encoding,
    rates,
)

from cl_bench.eval import EvalOptions, evaluate, groups
from cl_bench.eval.geometry import cosine_rows
from cl_bench.eval.registry import task_sentences
from cl_bench.eval.sts import load_sts_task, spearman100
from cl_bench.eval.transfer import load_transfer_task
from cl_bench.models.encoder import SentenceEncoder
from cl_bench.models.inference import (
    EncodingSettings,
    InferenceConfigError,
    check_bf16,
    cpu_flags,
    encoding,
    onnxruntime_available,
)

DEV_TASKS = ("stsb", "sickr")  # the STS tasks with a dev split
STS_TASKS, TRANSFER_TASKS = groups()["sts"], groups()["transfer"]


class TokenCounter:
    """Wraps ``encoder.forward`` to count the (padded) tokens fed to the model."""

    def __init__(self, encoder: SentenceEncoder) -> None:
        self.tokens = 0
        self._forward = encoder.forward
        encoder.forward = self  # type: ignore[method-assign]

    def __call__(self, features: dict[str, torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
        self.tokens += int(features["input_ids"].numel())
        return self._forward(features, *args, **kwargs)


def naive_sts(
    encoder: SentenceEncoder, data_dir: Path, batch_size: int, tasks: tuple[str, ...] = STS_TASKS
) -> dict[str, float]:
    """Score the STS test (and dev) figures pair batch by pair batch, without sorting or de-duplication."""

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
    for task in tasks:
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


def cpu_description() -> str:
    """CPU model, the flags that decide the backends' kernels, and the load average."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    flags = sorted(cpu_flags() & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_vnni"})
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"CPU: {model}, {os.cpu_count()} cores, flags: {' '.join(flags)}; load average {load}"


def sts_columns(encoder: SentenceEncoder) -> dict[str, tuple[str, str]]:
    """Column name -> (backend, precision) of the columns this machine can run."""
    columns = {"torch fp32": ("torch", "fp32")}
    if onnxruntime_available():
        columns["ONNX Runtime fp32"] = ("onnx", "fp32")
    try:
        check_bf16(encoder.device)
        columns["torch bf16"] = ("torch", "bf16")
    except InferenceConfigError as err:
        print(f"bf16 column skipped: {err}")
    return columns


def transfer_sentences(data_dir: Path) -> list[str]:
    """Every distinct sentence the 7 transfer tasks encode."""
    sentences: list[str] = []
    for task in TRANSFER_TASKS:
        sentences += task_sentences(load_transfer_task(data_dir, task))
    return list(dict.fromkeys(sentences))


def main() -> None:
    parser = encoder_parser(__doc__)
    parser.add_argument("--transfer", action="store_true", help="also time encoding the transfer tasks' sentences")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive per-pair loop")
    parser.add_argument("--tasks", nargs="+", default=list(STS_TASKS), choices=STS_TASKS,
                        help="STS tasks to time (default: all 7)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile a torch fp32 encoding of the tasks' sentences (torch.profiler): where the time goes")
    args = parser.parse_args()
    tasks = tuple(task for task in STS_TASKS if task in args.tasks)
    encoder = load_encoder(args)
    data_dir = Path(args.data)
    print(cpu_description(), flush=True)
    peaks = measure_peaks(args.threads)  # the bench_gemm.py shapes, in this run, on these threads
    for task in tasks:  # parse once up front so no timing includes file reading
        load_sts_task(data_dir, task, ("dev", "test"))
    columns = sts_columns(encoder)
    for backend, precision in columns.values():  # warm-up; makes the ONNX export outside the timings
        with encoding(EncodingSettings(backend, precision)):
            _, export_s, _ = timed(encoder.encode, ["a warm-up sentence."] * 8, batch_size=8)
        if backend == "onnx":
            print(f"ONNX export + session start: {export_s:.1f} s (once per model; cached on disk)", flush=True)
    counter = TokenCounter(encoder)
    shapes = BatchShapes(encoder)  # every padded batch, whatever the backend: the FLOPs actually run
    flops: dict[str, float] = {}

    rows: dict[str, tuple[dict[str, float], float, float]] = {}
    for name, (backend, precision) in columns.items():
        shapes.reset()
        rows[name] = timed(
            evaluate, encoder, data_dir, list(tasks), EvalOptions(batch_size=args.batch_size, align_uniform=False,
                                                                  anisotropy=False, backend=backend, precision=precision,
                                                                  cache=False),
        )
        flops[name] = encoder_flops(encoder.backbone.config, shapes.batches)
        print(f"{name}: {rows[name][1]:.1f} s wall, {rows[name][2]:.1f} s CPU; {rates(*rows[name][1:], flops[name], peaks)}"
              f" ({shapes.padded_tokens()} padded tokens, {shapes.real_tokens} real)", flush=True)
        if name == "torch fp32":
            ours_tokens, counter.tokens = counter.tokens, 0
    if not args.no_naive:
        rows["naive loop (torch fp32)"] = timed(naive_sts, encoder, data_dir, args.batch_size, tasks)
        naive_tokens = counter.tokens

    reference, reference_s, reference_cpu = rows["torch fp32"]
    figures = [*tasks, *(f"{task}_dev" for task in DEV_TASKS if task in tasks)]
    print(f"model {args.model} pooler={args.pooler} threads={args.threads} batch={args.batch_size}")
    print(f"{'figure':10s} " + " ".join(f"{name:>24s}" for name in rows))
    for figure in figures:
        print(f"{figure:10s} " + " ".join(f"{rows[name][0][figure]:24.3f}" for name in rows))
    print(f"{'column':24s} {'wall s':>8s} {'CPU s':>8s} {'speed-up (wall)':>16s} {'speed-up (CPU)':>15s} {'max |diff|':>11s}")
    for name, (results, wall, cpu) in rows.items():
        diff = max(abs(results[f] - reference[f]) for f in figures)
        print(f"{name:24s} {wall:8.1f} {cpu:8.1f} {reference_s / wall:15.2f}x {reference_cpu / cpu:14.2f}x {diff:11.4f}")
    if not args.no_naive:
        print(f"tokens torch fp32: {ours_tokens}   naive: {naive_tokens}   ratio: {naive_tokens / ours_tokens:.2f}x")
    for name in flops:  # the whole evaluate() is timed: encoding, and the (small) scoring
        print(f"{name:24s} {rates(*rows[name][1:], flops[name], peaks)}")
    if args.transfer:
        sentences = transfer_sentences(data_dir)
        print(f"transfer tasks: {len(sentences)} distinct sentences", flush=True)
        vectors = {}
        for name, (backend, precision) in columns.items():
            shapes.reset()
            with encoding(EncodingSettings(backend, precision)):
                vectors[name], wall, cpu = timed(encoder.encode, sentences, batch_size=args.batch_size)
            cosine = float(np.max(1 - cosine_rows(vectors[name], vectors["torch fp32"])))
            print(f"transfer encoding {name:20s} {wall:8.1f} s wall {cpu:8.1f} s CPU, "
                  f"{rates(wall, cpu, encoder_flops(encoder.backbone.config, shapes.batches), peaks)}, "
                  f"max cosine distance to torch fp32 {cosine:.1e}", flush=True)
    if args.profile:
        sentences = [s for task in tasks for parts in load_sts_task(data_dir, task, ("dev", "test")).values()
                     for s in (*parts.sent1, *parts.sent2)]
        print(f"where a torch fp32 encoding of the {len(set(sentences))} distinct STS sentences spends its time:")
        profile = profile_encoding(encoder, sentences, args.batch_size)
        for part, seconds in profile:
            print(f"  {part:50s} {seconds:7.2f} s {100 * seconds / profile[0][1]:5.1f}%")
    print(cpu_description())


if __name__ == "__main__":
    main()
