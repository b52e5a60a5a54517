"""The full STS + transfer evaluation suite of one encoder on one device, timed part by part, beside its
baselines measured in the same run (issue 37 items 2-3; made for issue 25 item 4).

The model is a randomly initialised ``bert-base``-shaped BertConfig (``--random-config bert-base``: ``BertConfig()``'s
defaults, tokenizer of ``--model``, no hub), moved to ``--device``. Parts, in this order (each guarded: a failing
part prints its traceback and the others run):

1. ``encodings``, per ``--precision`` (bf16, fp32, ...): ``evaluate(tasks=<STS tasks>)`` and the transfer tasks'
   sentences in one ``encode`` (``EmbeddingTable``), with TFLOP/s and MFU against the same-run matmul peak;
2. ``suite end to end``: ``evaluate`` of every STS and transfer task (``--transfer-config``), precision ``auto``,
   geometry metrics on, no embedding cache, the classifiers where ``evaluate`` runs them (the encoder's CUDA device:
   the torch trainer; a CPU: the numba kernel): **target <= 15 s on a GPU with bf16 bert-base**, beside the
   baseline ``fp32 encoding + CPU classifiers`` (part 1's fp32 times + part 6's CPU classifier times);
3. ``STS-B dev evaluation``: ``evaluate_dev(select_metric=stsb_dev)`` as training calls it, first call and the
   median of the next ones (dev sets tokenised once): **target <= 0.3 s**;
4. ``job set-up``: what each job of a sweep in one process pays before training: the encoder read from its
   folder (page cache) and moved to the device, the data and the first dev evaluation, twice: **target: the
   second job <= 2 s** (Hydra's composition and MLflow's run are not in it: absent from the GPU image);
5. ``real-model STS``: ``--real-model`` (all-MiniLM-L6-v2, its weights rounded to fp16 when staged by
   gpu_checks.sh, evaluated in fp32 arithmetic) on ``--real-sts-tasks`` in fp32, bf16 and TF32 where the device has
   them: per task and the largest |difference| to fp32, against the ``eval.precision=auto`` rule (bf16 while
   every figure is within 0.05 of fp32, else TF32);
6. ``classifiers``: SentEval's classifier per transfer task on the features of part 1's first precision, with the
   torch trainer on ``--device`` and the CPU kernel (``--threads``), their figures side by side: **target: within
   0.1 on every task** (on a CPU the torch path runs on the CPU: the comparison still runs).

Figures of a random model are chance-level: they are printed only so a broken path (NaN, a crash) shows.

    python benchmarks/bench_suite_gpu.py --random-config bert-base --device cuda --precision bf16 fp32 \\
        --data ../shared/data --threads 16 --real-model ../shared/models/all-MiniLM-L6-v2
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import replace
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

from cl_bench.eval import EvalOptions, evaluate, evaluate_dev, groups
from cl_bench.eval.embed import EmbeddingTable
from cl_bench.eval.options import TRANSFER_CONFIGS
from cl_bench.eval.registry import task_sentences
from cl_bench.eval.senteval_classifier import classifier_device, torch_classifier_device
from cl_bench.eval.sts import load_sts_task
from cl_bench.eval.transfer import load_transfer_task, run_transfer_task
from cl_bench.models.encoder import SentenceEncoder, build_encoder, quiet_transformers_bars
from cl_bench.models.inference import (
    AUTO_MAX_STS_DELTA,
    EncodingSettings,
    InferenceConfigError,
    check_inference_options,
    encoding,
    resolve_precision,
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


#: issue 37's targets on one H100/H200 with bf16 bert-base
SUITE_TARGET_S, DEV_TARGET_S, SETUP_TARGET_S, CLASSIFIER_TOLERANCE = 15.0, 0.3, 2.0, 0.1


def median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def main(argv: list[str] | None = None) -> None:
    parser = encoder_parser(__doc__)
    parser.add_argument("--random-config", choices=sorted(RANDOM_CONFIGS),
                        help="evaluate a randomly initialised BertConfig of this shape with --model's tokenizer")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16", "tf32", "auto"), default=["bf16", "fp32"],
                        help="eval.precision values of part 1, run in this order")
    parser.add_argument("--transfer-config", choices=sorted(TRANSFER_CONFIGS), default="full")
    parser.add_argument("--sts-tasks", nargs="*", default=list(groups()["sts"]), choices=groups()["sts"])
    parser.add_argument("--transfer-tasks", nargs="*", default=list(groups()["transfer"]), choices=groups()["transfer"])
    parser.add_argument("--peak-tokens", type=int, default=8192, help="rows of the GEMM-peak shapes")
    parser.add_argument("--dev-repeats", type=int, default=5, help="STS-B dev evaluations timed (part 3)")
    parser.add_argument("--real-model", default=None,
                        help="a trained model folder for part 5 ('random': the timed model, for a smoke run; none: skipped)")
    parser.add_argument("--geometry", action=argparse.BooleanOptionalAction, default=True,
                        help="part 2 with alignment/uniformity and the anisotropy view on STS-B, as a job's evaluation")
    parser.add_argument("--real-sts-tasks", nargs="*", default=list(groups()["sts"]), choices=groups()["sts"])
    parser.add_argument("--parts", nargs="*", default=["encodings", "suite", "dev", "setup", "real", "classifiers"],
                        help="parts to run (default all)")
    parser.set_defaults(pooler="avg")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    quiet_transformers_bars()
    device = bench_device(args.device)
    print(device_description(device), flush=True)
    data_dir = Path(args.data)
    scratch = tempfile.TemporaryDirectory(prefix="cl-bench-random-")
    start = time.perf_counter()
    model_path = random_model_dir(args.random_config, args.model, scratch.name) if args.random_config else args.model
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
            print(f"[{precision}] encodings: skipped on this device: {err}", flush=True)
    parts: dict[str, dict[str, float]] = {precision: {} for precision in precisions}
    tables: dict[str, EmbeddingTable] = {}
    summary: list[str] = []

    def tokenise_ahead(model: SentenceEncoder, what: str, run: Callable[[], object]) -> None:
        """Run ``run()`` (an evaluation) with ``model`` only tokenising (random vectors, no forward pass): the
        timed runs that follow all find their token ids in the encoder's memo, so the first precision timed
        does not pay the tokenisation the next ones skip (the H200 run before this showed bf16, timed first,
        slower than fp32)."""
        rng = np.random.default_rng(0)

        def tokenise_only(unique: list[str], batch_size: int, backend: str, settings: object) -> np.ndarray:
            if unique:
                model._token_ids(unique)
            return rng.standard_normal((len(unique), model.hidden_size)).astype(np.float32)

        start = time.perf_counter()
        model._encode_distinct = tokenise_only  # type: ignore[method-assign]
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                run()
        finally:
            del model._encode_distinct
        print(f"{what}: tokenised ahead, untimed: {time.perf_counter() - start:.2f} s", flush=True)

    # the STS timings' options (each sets its precision): torch, no embedding cache, no geometry
    sts_options = EvalOptions(batch_size=args.batch_size, align_uniform=False, anisotropy=False, backend="torch",
                              cache=False)
    if "encodings" in set(args.parts) and precisions:
        if args.sts_tasks:
            tokenise_ahead(encoder, "STS sentences", lambda: evaluate(
                encoder, data_dir, list(args.sts_tasks), replace(sts_options, precision=precisions[0])))
        if transfer:
            tokenise_ahead(encoder, "transfer sentences",
                           lambda: EmbeddingTable(encoder, transfer_sentences, args.batch_size))

    def encode_all(precision: str) -> None:
        peak = peaks[PEAK_KEYS.get(resolve_precision(precision, device), "float32")]
        with encoding(EncodingSettings("torch", precision)):  # warm-up: CUDA context, cuBLAS handles, autocast caches
            encoder.encode(["a warm-up sentence.", "another, somewhat longer, warm-up sentence."] * 16, batch_size=32)
        if args.sts_tasks:
            shapes.reset()
            synchronize(device)
            start = time.perf_counter()
            scores = evaluate(encoder, data_dir, list(args.sts_tasks), replace(sts_options, precision=precision))
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
                  f"{len(shapes.batches)} batches, {shapes.padded_tokens()} padded tokens; "
                  f"{rate(encoder_flops(config, shapes.batches), table.seconds, peak, precision)}; "
                  f"embeddings {table.vectors.dtype}, finite: {bool(np.isfinite(table.vectors).all())}", flush=True)

    def suite_end_to_end() -> None:
        guarded("classifier warm-up", lambda: print(
            f"classifier warm-up (numba compilation, outside the timings): {warm_up_classifier(args.transfer_config):.1f} s",
            flush=True))
        tasks = [*args.sts_tasks, *args.transfer_tasks]
        synchronize(device)
        start = time.perf_counter()
        scores = evaluate(encoder, data_dir, tasks, EvalOptions(
            batch_size=args.batch_size, transfer_config=args.transfer_config, backend="torch", precision="auto",
            cache=False, align_uniform=args.geometry, anisotropy=args.geometry))
        synchronize(device)
        seconds = time.perf_counter() - start
        where = "the torch trainer on " + str(device) if torch_classifier_device(device) else "the CPU kernel"
        line = (f"suite end to end: {seconds:.2f} s for {len(args.sts_tasks)} STS + {len(args.transfer_tasks)} transfer "
                f"tasks ({args.transfer_config}{', geometry' if args.geometry else ''}), eval.precision=auto -> {resolve_precision('auto', device)}, classifiers "
                f"on {where}; target <= {SUITE_TARGET_S:.0f} s on a GPU with bf16 bert-base: "
                f"{'MET' if seconds <= SUITE_TARGET_S else 'NOT MET'}; figures finite: "
                f"{all(math.isfinite(v) for v in scores.values())}")
        print(line, flush=True)
        summary.append(line)

    def dev_evaluation() -> None:
        times = []
        for _ in range(max(2, args.dev_repeats)):
            synchronize(device)
            start = time.perf_counter()
            scores = evaluate_dev(encoder, data_dir, "stsb_dev", args.batch_size)
            synchronize(device)
            times.append(time.perf_counter() - start)
        steady = median(times[1:])
        line = (f"STS-B dev evaluation (evaluate_dev, precision auto -> {resolve_precision('auto', device)}): first "
                f"{times[0]:.3f} s (tokenises the dev sets), then median {steady:.3f} s of {len(times) - 1}; target <= "
                f"{DEV_TARGET_S} s: {'MET' if steady <= DEV_TARGET_S else 'NOT MET'}; stsb_dev {scores['stsb_dev']:.2f}")
        print(line, flush=True)
        summary.append(line)
        # where the dev evaluation's time goes (issue 37 item 3): the same call without the geometry metrics
        # (alignment/uniformity, and the anisotropy's float64 SVD of the STS-B dev embeddings on the CPU)
        bare = []
        for _ in range(max(1, args.dev_repeats - 1)):
            synchronize(device)
            start = time.perf_counter()
            evaluate_dev(encoder, data_dir, "stsb_dev", args.batch_size, align_uniform=False, anisotropy=False)
            synchronize(device)
            bare.append(time.perf_counter() - start)
        print(f"STS-B dev evaluation without the geometry metrics: median {median(bare):.3f} s of {len(bare)} "
              f"(the geometry: {steady - median(bare):.3f} s of the {steady:.3f} s)", flush=True)

    def job_setup() -> None:
        from cl_bench.eval.registry import get_task, load_task
        from cl_bench.eval.tasks import dev_tasks

        times = []
        for job in (1, 2):
            synchronize(device)
            start = time.perf_counter()
            job_encoder = build_encoder(model_path, pooler=args.pooler, fresh_mlp=False).to(device)
            loaded = time.perf_counter() - start
            for task in dev_tasks("stsb_dev"):
                load_task(data_dir, task, get_task(task).dev_read_parts())
            evaluate_dev(job_encoder, data_dir, "stsb_dev", args.batch_size)
            synchronize(device)
            times.append(time.perf_counter() - start)
            print(f"job set-up {job}: {times[-1]:.2f} s (encoder from its folder to {device} {loaded:.2f} s, then data "
                  f"and the first dev evaluation)", flush=True)
            del job_encoder
        line = (f"sweep job set-up in one process: first job {times[0]:.2f} s, next job {times[1]:.2f} s (without "
                f"Hydra and MLflow); target <= {SETUP_TARGET_S:.0f} s: {'MET' if times[1] <= SETUP_TARGET_S else 'NOT MET'}")
        print(line, flush=True)
        summary.append(line)

    def real_model_sts() -> None:
        if not args.real_model:
            print("real-model STS: skipped (no --real-model)", flush=True)
            return
        path = model_path if args.real_model == "random" else args.real_model
        real = build_encoder(path, pooler="avg", fresh_mlp=False).float().to(device)  # fp32 weights
        figures: dict[str, dict[str, float]] = {}
        tokenise_ahead(real, "real-model STS sentences", lambda model=real: evaluate(
            model, data_dir, list(args.real_sts_tasks), replace(sts_options, precision="fp32")))
        for precision in ("fp32", "bf16", "tf32"):
            try:
                check_inference_options("torch", precision, device)
            except InferenceConfigError as err:
                print(f"real-model STS {precision}: skipped on this device: {err}", flush=True)
                continue
            start = time.perf_counter()
            scores = evaluate(real, data_dir, list(args.real_sts_tasks), replace(sts_options, precision=precision))
            figures[precision] = {task: scores[task] for task in args.real_sts_tasks}
            print(f"real-model STS {precision} ({time.perf_counter() - start:.2f} s): "
                  + " ".join(f"{task} {value:.2f}" for task, value in figures[precision].items()), flush=True)
        for precision in ("bf16", "tf32"):
            if precision in figures and "fp32" in figures:
                worst = max(abs(figures[precision][t] - figures["fp32"][t]) for t in args.real_sts_tasks)
                line = (f"real-model STS {precision} vs fp32: largest |difference| {worst:.3f} (Spearman x 100, "
                        f"{len(args.real_sts_tasks)} tasks); rule |difference| <= {AUTO_MAX_STS_DELTA} on every task: "
                        f"{'MET' if worst <= AUTO_MAX_STS_DELTA else 'NOT MET'}")
                print(line, flush=True)
                summary.append(line)
        del real

    def classifiers() -> None:
        if not tables:
            print("classifiers: skipped (no transfer features: part 1 did not run or failed)", flush=True)
            return
        precision = next(iter(tables))
        table = tables[precision]
        worst, device_total, cpu_total = 0.0, 0.0, 0.0
        for task, task_parts in transfer.items():
            start = time.perf_counter()
            with classifier_device(device):
                on_device = run_transfer_task(task, task_parts, table, args.transfer_config)
            synchronize(device)
            device_seconds = time.perf_counter() - start
            start = time.perf_counter()
            on_cpu = run_transfer_task(task, task_parts, table, args.transfer_config)
            cpu_seconds = time.perf_counter() - start
            device_total, cpu_total = device_total + device_seconds, cpu_total + cpu_seconds
            difference = max(abs(on_device[key] - on_cpu[key]) for key in on_cpu)
            worst = max(worst, difference)
            print(f"[{precision}] classifier {task:5s}: torch on {device} {device_seconds:6.2f} s, CPU kernel "
                  f"{cpu_seconds:6.2f} s; " + ", ".join(f"{key} {on_device[key]:.2f} / {on_cpu[key]:.2f}" for key in on_cpu)
                  + f"; largest |difference| {difference:.2f}", flush=True)
        parts.setdefault("fp32", {})["CPU classifiers"] = cpu_total
        line = (f"classifiers: torch on {device} {device_total:.2f} s, CPU kernel {cpu_total:.2f} s "
                f"({cpu_total / device_total if device_total else float('nan'):.2f}x); largest |difference| of any figure "
                f"{worst:.2f}; target <= {CLASSIFIER_TOLERANCE} on every task: "
                f"{'MET' if worst <= CLASSIFIER_TOLERANCE + 1e-9 else 'NOT MET'}")
        print(line, flush=True)
        summary.append(line)
        # the path evaluate() takes here (torch_classifier_device's thread rule) must not be the slower one
        chosen_path = torch_classifier_device(device)
        taken, other = (device_total, cpu_total) if chosen_path is not None else (cpu_total, device_total)
        line = (f"classifier path of the suite here ({torch.get_num_threads()} torch threads): "
                f"{'torch on ' + str(device) if chosen_path is not None else 'CPU kernel'} {taken:.2f} s, the other "
                f"{other:.2f} s; target: the suite takes the faster path (within 10%): "
                f"{'MET' if taken <= 1.1 * other else 'NOT MET'}")
        print(line, flush=True)
        summary.append(line)

    chosen = set(args.parts)
    if "encodings" in chosen:
        for precision in precisions:
            guarded(f"[{precision}] encoding", encode_all, precision)
    for name, function in (("suite", suite_end_to_end), ("dev", dev_evaluation), ("setup", job_setup),
                           ("real", real_model_sts), ("classifiers", classifiers)):
        if name in chosen:
            guarded(name, function)
    for precision, timed in parts.items():
        if timed:
            print(f"suite {precision}: " + " + ".join(f"{name} {seconds:.2f} s" for name, seconds in timed.items())
                  + f" = {sum(timed.values()):.2f} s"
                  + (" (the baseline: fp32 encoding + CPU classifiers)" if precision == "fp32" else ""), flush=True)
    for name in ("STS (encode + score)", "transfer encoding"):
        if "bf16" in parts and "fp32" in parts and name in parts["bf16"] and name in parts["fp32"]:
            bf16, fp32 = parts["bf16"][name], parts["fp32"][name]
            summary.append(f"bf16 vs fp32 {name}: {bf16:.2f} s vs {fp32:.2f} s ({fp32 / bf16:.2f}x); target bf16 no "
                           f"slower than fp32: {'MET' if bf16 <= fp32 else 'NOT MET'}")
    print("=== summary ===\n" + "\n".join(summary), flush=True)
    print(device_description(device))
    scratch.cleanup()


if __name__ == "__main__":
    main()
