"""The full STS + transfer evaluation suite of one encoder on one device, per precision, timed part by part.

Made for issue 25 item 4 (a GPU): a randomly initialised ``bert-base``-shaped BertConfig (``--random-config
bert-base``: ``BertConfig()``'s defaults, tokenizer of ``--model``, no hub), moved to ``--device``, evaluated
in each ``--precision`` exactly as ``evaluate`` runs it (``eval.backend=torch``, ``eval.precision``; the
embedding cache off). The encodings of every precision run first, then the classifiers (CPU), so that a run cut
short by a time limit still has the encodings. Per precision it prints:

* ``STS``: ``evaluate(tasks=["sts"])`` (every distinct sentence of the 7 STS tasks encoded once, then the
  Spearmans), with the achieved TFLOP/s of its encoding and the MFU against the same-run matmul peak;
* ``transfer encoding``: every distinct sentence of the transfer tasks in one ``encode`` (``EmbeddingTable``,
  what ``evaluate(tasks=["transfer"])`` does), with its TFLOP/s and MFU;
* ``transfer classifiers``: SentEval's classifier for each task (``--transfer-config``; on the CPU, ``--threads``);
* the total, beside the target (<= 60 s in bf16 on a GPU).

Figures of a random model are chance-level: they are printed only so a broken path (NaN, a crash) shows.

    python benchmarks/bench_suite_gpu.py --random-config bert-base --device cuda --precision bf16 fp32 \\
        --data ../shared/data --threads 16
"""

from __future__ import annotations

import math
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from _common import (
    RANDOM_CONFIGS,
    BatchShapes,
    bench_device,
    device_description,
    encoder_flops,
    encoder_parser,
    print_device_peaks,
    random_model_dir,
    synchronize,
)

from cl_bench.eval import evaluate, groups
from cl_bench.eval.embed import EmbeddingTable
from cl_bench.eval.registry import task_sentences
from cl_bench.eval.sts import load_sts_task
from cl_bench.eval.tasks import TRANSFER_CONFIGS
from cl_bench.eval.transfer import load_transfer_task, run_transfer_task
from cl_bench.models.encoder import build_encoder, quiet_transformers_bars
from cl_bench.models.inference import (
    EncodingSettings,
    InferenceConfigError,
    check_inference_options,
    encoding,
)

PEAK_KEYS = {"fp32": "float32", "bf16": "bfloat16"}


def rate(flops: float, seconds: float, peak: float, precision: str) -> str:
    """``12.34 TFLOP/s, MFU 5.6% of the measured bf16 matmul peak``."""
    tflops = flops / seconds / 1e12 if seconds > 0 else float("nan")
    return f"{tflops:.4g} TFLOP/s, MFU {100 * tflops / peak:.1f}% of the measured {precision} matmul peak"


def guarded(label: str, function: Callable[..., object], *args: object) -> bool:
    """Run ``function(*args)``; on an exception print it with its traceback and go on (a GPU run is one
    short lease: a failing part must not take the other parts' figures with it). Whether it succeeded."""
    try:
        function(*args)
    except Exception:  # noqa: BLE001 (reported, then the next part runs)
        print(f"{label}: FAILED\n{traceback.format_exc()}", flush=True)
        return False
    return True


def warm_up_classifier(config: str) -> float:
    """Seconds to run SentEval's batched classifier once on tiny random data: numba compiles its kernel
    at the first call (cached on disk afterwards), which would otherwise land in the first task's time."""
    from cl_bench.eval.senteval_classifier import SENTEVAL_CONFIGS, DataSplit, fit_grid

    start = time.perf_counter()
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 8)).astype(np.float32), rng.integers(0, 2, 64)
    fit_grid(x, y, [DataSplit(np.arange(48), np.arange(48, 64))], [0.0, 1e-3], 2, SENTEVAL_CONFIGS[config])
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = encoder_parser(__doc__)
    parser.add_argument("--random-config", choices=sorted(RANDOM_CONFIGS),
                        help="evaluate a randomly initialised BertConfig of this shape with --model's tokenizer")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16"), default=["bf16", "fp32"],
                        help="eval.precision values, run in this order")
    parser.add_argument("--transfer-config", choices=sorted(TRANSFER_CONFIGS), default="full")
    parser.add_argument("--sts-tasks", nargs="*", default=list(groups()["sts"]), choices=groups()["sts"])
    parser.add_argument("--transfer-tasks", nargs="*", default=list(groups()["transfer"]), choices=groups()["transfer"])
    parser.add_argument("--peak-tokens", type=int, default=8192, help="rows of the GEMM-peak shapes")
    parser.set_defaults(pooler="avg")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    quiet_transformers_bars()
    device = bench_device(args.device)
    print(device_description(device), flush=True)
    data_dir = Path(args.data)
    with tempfile.TemporaryDirectory(prefix="cl-bench-random-") as scratch:
        start = time.perf_counter()
        model_path = random_model_dir(args.random_config, args.model, scratch) if args.random_config else args.model
        encoder = build_encoder(model_path, pooler=args.pooler, fresh_mlp=False).to(device)
        print(f"model set-up (random init, save, load, to {device}): {time.perf_counter() - start:.1f} s", flush=True)
    config = encoder.backbone.config
    label = f"random {args.random_config} (tokenizer {args.model})" if args.random_config else args.model
    params = sum(p.numel() for p in encoder.parameters()) / 1e6
    print(f"model {label}: {config.num_hidden_layers} layers, H {config.hidden_size}, {params:.1f}M parameters, "
          f"pooler {args.pooler}, batch {args.batch_size}, transfer config {args.transfer_config}, "
          f"CPU threads {torch.get_num_threads()}", flush=True)
    peaks = print_device_peaks(device, config, args.peak_tokens)

    start = time.perf_counter()  # parsing outside every timing below (evaluate's loading is cached per file)
    for task in args.sts_tasks:
        load_sts_task(data_dir, task, ("dev", "test"))
    transfer = {task: load_transfer_task(data_dir, task) for task in args.transfer_tasks}
    transfer_sentences = [s for parts in transfer.values() for s in task_sentences(parts)]
    print(f"data loading: {time.perf_counter() - start:.1f} s; transfer: {len(set(transfer_sentences))} distinct "
          f"sentences", flush=True)

    shapes = BatchShapes(encoder)
    precisions = []
    for precision in args.precision:
        try:
            check_inference_options("torch", precision, device)
            precisions.append(precision)
        except InferenceConfigError as err:
            print(f"suite {precision}: skipped on this device: {err}", flush=True)
    # Encodings of every precision first, classifiers after: the encodings are the cheap, GPU-bound part,
    # so a run cut short by its time limit still has them; the classifiers run on the CPU.
    parts: dict[str, dict[str, float]] = {precision: {} for precision in precisions}
    tables: dict[str, EmbeddingTable] = {}

    def encode_all(precision: str) -> None:
        peak = peaks[PEAK_KEYS[precision]]
        with encoding(EncodingSettings("torch", precision)):  # warm-up: CUDA context, cuBLAS handles, autocast caches
            encoder.encode(["a warm-up sentence.", "another, somewhat longer, warm-up sentence."] * 16, batch_size=32)
        if args.sts_tasks:
            shapes.reset()
            synchronize(device)
            start = time.perf_counter()
            scores = evaluate(encoder, data_dir, tasks=list(args.sts_tasks), batch_size=args.batch_size,
                              align_uniform=False, anisotropy=False, backend="torch", precision=precision, cache=False)
            synchronize(device)
            seconds = parts[precision]["STS (encode + score)"] = time.perf_counter() - start
            figures = [scores[task] for task in args.sts_tasks]
            print(f"[{precision}] STS: {seconds:.2f} s, {len(shapes.batches)} batches, "
                  f"{shapes.padded_tokens()} padded tokens; {rate(encoder_flops(config, shapes.batches), seconds, peak, precision)}; "
                  f"mean Spearman {np.mean(figures):.2f} (random model: chance level; finite: "
                  f"{all(math.isfinite(f) for f in figures)})", flush=True)
        if transfer:
            shapes.reset()
            with encoding(EncodingSettings("torch", precision)):
                synchronize(device)
                table = tables[precision] = EmbeddingTable(encoder, transfer_sentences, args.batch_size)
                synchronize(device)
            parts[precision]["transfer encoding"] = table.seconds
            print(f"[{precision}] transfer encoding: {table.seconds:.2f} s, {len(table)} sentences, "
                  f"{shapes.padded_tokens()} padded tokens; "
                  f"{rate(encoder_flops(config, shapes.batches), table.seconds, peak, precision)}; "
                  f"embeddings {table.vectors.dtype}, finite: {bool(np.isfinite(table.vectors).all())}", flush=True)

    def classify(precision: str) -> None:
        parts[precision]["transfer classifiers"] = 0.0
        for task, task_parts in transfer.items():
            start = time.perf_counter()
            scores = run_transfer_task(task, task_parts, tables[precision], args.transfer_config)
            seconds = time.perf_counter() - start
            parts[precision]["transfer classifiers"] += seconds
            figures_text = " ".join(f"{key} {value:.2f}" for key, value in scores.items())
            print(f"[{precision}] classifier {task:5s}: {seconds:7.2f} s  ({figures_text})", flush=True)

    failed: set[str] = set()
    for precision in precisions:
        if not guarded(f"[{precision}] encoding", encode_all, precision):
            failed.add(precision)
    if tables:  # a failed warm-up (the classifier's API changed) only moves the compilation into the first task
        guarded("classifier warm-up", lambda: print(
            f"classifier warm-up (numba compilation, outside the timings): {warm_up_classifier(args.transfer_config):.1f} s",
            flush=True))
    for precision in tables:
        if not guarded(f"[{precision}] classifiers", classify, precision):
            failed.add(precision)
    for precision in precisions:
        target = " (target <= 60 s in bf16 on a GPU)" if precision == "bf16" else ""
        incomplete = " (INCOMPLETE: a part failed, see above)" if precision in failed else ""
        print(f"suite {precision}: " + " + ".join(f"{name} {seconds:.2f} s" for name, seconds in parts[precision].items())
              + f" = {sum(parts[precision].values()):.2f} s{target}{incomplete}", flush=True)
    print(device_description(device))


if __name__ == "__main__":
    main()
