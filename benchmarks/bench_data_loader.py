"""Training steps per second with ``train.num_workers=0`` vs ``2``, on an expensive text augmentation
(``eda_synonym``: WordNet look-ups for every word) and on plain dropout views (SimCSE), and on CERT with
``eda_synonym`` keys (a method whose text work also moved into ``Method.prepare``), in one run.

    python benchmarks/bench_data_loader.py --model ../shared/models/all-MiniLM-L6-v2 --data ../shared/data

Each configuration trains the same steps from the same weights through cl-bench's Trainer pieces
(the method, its DataLoader, AdamW, the method's after-step hook); the workers prepare the next
batches (augmentation + tokenisation) while the main process runs the forward and backward passes.
On 2 cores the workers compete with torch's threads, so the gain is bounded by the share of a step
spent on data work.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from _common import print_machine
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import typed_specs
from cl_bench.data.loader import BatchLoader
from cl_bench.train.loop import build_method, make_optimizer, seed_everything

#: (method, augmentation) pairs measured, each with 0 and 2 workers
CASES = (("simcse", "eda_synonym"), ("simcse", "dropout"), ("cert", "eda_synonym"))


def steps_per_second(args: argparse.Namespace, method_name: str, augmentation: str, workers: int) -> float:
    """Median steps/s of ``args.steps`` training steps (after ``args.warmup``) with ``workers`` workers."""
    os.environ["CL_BENCH_DATA"] = args.data
    overrides = [f"method={method_name}", f"model.name_or_path={args.model}", "data=wiki1m_head",
                 f"augmentation={augmentation}", f"batch_size={args.batch_size}", "pooler=avg", "train.device=cpu"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    seed_everything(cfg.seed)
    method = build_method(typed_specs(cfg), torch.device("cpu"))
    items = method.read_corpus(cfg.data.train_file)[: args.batch_size * (args.steps + args.warmup + 2)]
    optimizer = make_optimizer(method, cfg.train)
    loader = BatchLoader(items, method.batches, method.prepare, args.batch_size, cfg.seed, num_workers=workers)
    times = []
    method.train()
    batches = loader.epoch(0)
    start = time.perf_counter()
    for step, batch in enumerate(batches):
        if step >= args.steps + args.warmup:
            break
        loss = method.training_step(batch)["loss"]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        method.on_after_step()  # CERT: momentum update of the key encoder, enqueue the keys
        now = time.perf_counter()
        if step >= args.warmup:
            times.append(now - start)
        start = now
    return 1.0 / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.environ.get("CL_BENCH_MINILM", "../shared/models/all-MiniLM-L6-v2"))
    parser.add_argument("--data", default=os.environ.get("CL_BENCH_DATA", "../shared/data"))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the training process")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    print(f"MiniLM, batch {args.batch_size}, max length 32, {args.steps} timed steps (median step)")
    for method_name, augmentation in CASES:
        rates = {workers: steps_per_second(args, method_name, augmentation, workers) for workers in (0, 2)}
        print(f"method={method_name:7s} augmentation={augmentation:12s} num_workers=0: {rates[0]:.3f} steps/s   "
              f"num_workers=2: {rates[2]:.3f} steps/s   ratio {rates[2] / rates[0]:.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
