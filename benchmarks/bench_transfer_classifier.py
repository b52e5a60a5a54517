"""SentEval's transfer classifier on the real transfer data: the previous trainer (one batched torch
program per protocol stage, each data split's models in lock-step, one torch thread) against cl-bench's
(every model of a task, the refits included, in one compiled program, a data split per thread on
torch's threads), in the same run, per task: CPU and wall time of each, their ratios, and whether
the task's figures are identical. The compiled kernel's one-off cost per process (importing numba,
loading or compiling the kernel) is measured first, apart, and printed.

The features are computed once and cached in a file (``--cache``): ``--features static`` (default)
is the mean of all-MiniLM-L6-v2's input word embeddings (384 dims, seconds to compute: a cheap
encoder whose classifiers behave like those of a real one), ``--features encoder`` is the model
itself with ``--pooler`` (the suite's real features; minutes on a CPU).

Usage::

    python benchmarks/bench_transfer_classifier.py --data ../shared/data --configs full fast \\
        --threads 2 [--tasks mr trec] [--features static|encoder] [--reference]
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from _common import encoder_parser, load_encoder, print_machine
from _grid_per_split import fit_grid_per_split

import cl_bench.eval.senteval_classifier as senteval_classifier
from cl_bench.eval import groups
from cl_bench.eval.embed import EmbeddingTable
from cl_bench.eval.options import TRANSFER_CONFIGS
from cl_bench.eval.registry import task_sentences
from cl_bench.eval.transfer import load_transfer_task, run_transfer_task


class StaticEncoder:
    """Mean of a BERT checkpoint's input word embeddings over a sentence's word pieces ([CLS]/[SEP] excluded)."""

    def __init__(self, model: str) -> None:
        from safetensors.torch import load_file
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model)
        weights = load_file(str(Path(model) / "model.safetensors"))
        name = next(key for key in weights if key.endswith("word_embeddings.weight"))
        self.table = weights[name].float()

    def encode(self, sentences: Sequence[str], batch_size: int) -> np.ndarray:
        """(N, H) float32 mean word-piece embeddings."""
        out = np.zeros((len(sentences), self.table.shape[1]), dtype=np.float32)
        for start in range(0, len(sentences), 4096):
            ids = self.tokenizer(list(sentences[start : start + 4096]), add_special_tokens=False)["input_ids"]
            for row, pieces in enumerate(ids):
                if pieces:
                    out[start + row] = self.table[pieces].mean(0).numpy()
        return out


class CachedEncoder:
    """Serve ``encode`` from a ``.npz`` file keyed by the sentences' hash; fill it on a miss."""

    def __init__(self, encoder_factory: object, path: Path) -> None:
        self.factory, self.path = encoder_factory, path

    def encode(self, sentences: Sequence[str], batch_size: int) -> np.ndarray:
        """The cached vectors of exactly these sentences, else the encoder's (then cached)."""
        key = hashlib.sha256("\n".join(sentences).encode()).hexdigest()
        if self.path.exists():
            cached = np.load(self.path)
            if str(cached["key"]) == key:
                return cached["vectors"]
        vectors = np.asarray(self.factory().encode(sentences, batch_size=batch_size), dtype=np.float32)
        np.savez(self.path, key=key, vectors=vectors)
        return vectors


@contextlib.contextmanager
def previous_trainer() -> Iterator[None]:
    """Make ``batched=False`` run the previous trainer: the two-stage protocol (scan, then the
    chosen penalties' refits) with ``fit_grid_per_split`` in place of the one-at-a-time reference,
    which is exactly how the protocols ran before."""
    reference = senteval_classifier.fit_grid_sequential
    senteval_classifier.fit_grid_sequential = fit_grid_per_split
    try:
        yield
    finally:
        senteval_classifier.fit_grid_sequential = reference


def _timed(*args: object, **kwargs: object) -> tuple[dict[str, float], float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    scores = run_transfer_task(*args, **kwargs)
    return scores, time.perf_counter() - wall, time.process_time() - cpu


def _warm_up() -> tuple[float, float]:
    """Import numba and load (or compile) the kernel with a tiny grid: (wall, CPU) seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    x = np.random.default_rng(0).normal(size=(40, 8)).astype(np.float32)
    y = np.arange(40) % 2
    for config in senteval_classifier.SENTEVAL_CONFIGS.values():
        senteval_classifier.fit_grid(x, y, [senteval_classifier.DataSplit(np.arange(40))], [1e-3], 2, config)
    return time.perf_counter() - wall, time.process_time() - cpu


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = encoder_parser(__doc__)
    parser.add_argument("--configs", nargs="+", choices=sorted(TRANSFER_CONFIGS), default=["full"])
    parser.add_argument("--tasks", nargs="+", default=list(groups()["transfer"]), choices=groups()["transfer"])
    parser.add_argument("--features", choices=["static", "encoder"], default="static")
    parser.add_argument("--cache", type=Path, default=None, help="features file (default: /tmp/...)")
    parser.add_argument("--reference", action="store_true", help="also run the one-at-a-time reference (slow)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    suite = {task: load_transfer_task(Path(args.data), task) for task in groups()["transfer"]}
    data = {task: suite[task] for task in args.tasks}
    # the whole suite's sentences, so that one cache file serves every --tasks
    sentences = [text for parts in suite.values() for text in task_sentences(parts)]
    cache = args.cache or Path(f"/tmp/cl_bench_transfer_{args.features}.npz")
    factory = (lambda: StaticEncoder(args.model)) if args.features == "static" else (lambda: load_encoder(args))
    table = EmbeddingTable(CachedEncoder(factory, cache), sentences, args.batch_size)
    torch.set_num_threads(args.threads)
    print(f"features: {args.features}, {len(table)} distinct sentences x {table.width} ({cache}, {table.seconds:.1f} s)")
    wall, cpu = _warm_up()
    torch.set_num_threads(args.threads)
    print(f"one-off per process: numba import + kernel load/compile {wall:.1f} s wall {cpu:.1f} s CPU (not in the times below)")

    # name -> (run_transfer_task's batched flag, context it runs in)
    runs: dict[str, tuple[bool, Callable[[], contextlib.AbstractContextManager]]] = {
        "previous": (False, previous_trainer),
        "all-models": (True, contextlib.nullcontext),
    }
    if args.reference:
        runs["one-at-a-time"] = (False, contextlib.nullcontext)
    totals = {name: [0.0, 0.0] for name in runs}
    largest, identical = 0.0, True
    for config in args.configs:
        for task, parts in data.items():
            figures, times = {}, {}
            for name, (batched, context) in runs.items():
                torch.set_num_threads(args.threads)
                with context():
                    scores, wall, cpu = _timed(task, parts, table, config, batched=batched)
                figures[name], times[name] = scores, (wall, cpu)
                totals[name][0] += wall
                totals[name][1] += cpu
                shown = "  ".join(f"{key} {value:6.2f}" for key, value in scores.items())
                print(f"{config:4s} {task:5s} {name:13s} {shown:50s} {wall:7.1f} s wall {cpu:7.1f} s CPU  "
                      f"load {_load()}", flush=True)
            same = all(figures[name] == figures["all-models"] for name in runs)
            identical &= same
            for name in runs:
                if name != "all-models":
                    difference = max(abs(figures[name][k] - figures["all-models"][k]) for k in figures[name])
                    largest = max(largest, difference)
            (pw, pc), (nw, nc) = times["previous"], times["all-models"]
            print(f"{config:4s} {task:5s} previous / all-models: {pc / nc:5.2f}x CPU {pw / nw:5.2f}x wall; "
                  f"figures {'identical' if same else 'DIFFERENT'}", flush=True)
    for name, (wall, cpu) in totals.items():
        print(f"classifiers {name:13s}: {wall:8.1f} s wall {cpu:8.1f} s CPU")
    wall_ratio = totals["previous"][0] / totals["all-models"][0]
    cpu_ratio = totals["previous"][1] / totals["all-models"][1]
    print(f"previous / all-models: {wall_ratio:.2f}x wall, {cpu_ratio:.2f}x CPU; figures "
          f"{'identical' if identical else 'DIFFERENT'} (largest |difference| {largest:.2f}); "
          f"threads {args.threads}; load average at end {_load()}")


if __name__ == "__main__":
    main()
