"""The Trainer's SimCSE step on a CPU, per step: minor page faults, user and system CPU seconds, wall seconds.

    python benchmarks/bench_cpu_step.py --threads 1 --optimizer foreach --malloc default   # before issue 50's change
    python benchmarks/bench_cpu_step.py --threads 1                                        # the Trainer now (bf16)

MiniLM ``pooler=avg``, SimCSE with dropout 0.1, batch ``--batch-size``, max length 32, bf16 autocast
(``--precision``), :class:`cl_bench.train.step.TrainStep` with AdamW as ``--optimizer`` says (``trainer``: the
Trainer's choice, :func:`cl_bench.utils.optim.implementation`). ``--malloc default`` keeps glibc's defaults (the
step would otherwise set them with :func:`cl_bench.train.step.keep_freed_memory`). CPU seconds and page faults
depend little on other work on the machine; wall seconds do: run variants in turn and note the load (printed).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import torch
from bench_train_step import DROPOUT_SIMCSE

import cl_bench.train.step as step_module
from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.data.text import read_sentences
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder
from cl_bench.train.optim import parameter_groups
from cl_bench.train.precision import autocast
from cl_bench.utils.optim import implementation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="../shared/models/all-MiniLM-L6-v2")
    parser.add_argument("--corpus", default=os.path.join(os.environ.get("CL_BENCH_DATA", "../shared/data"), "corpus",
                                                         "wiki1m_for_simcse.head.txt"))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4, help="timed steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--optimizer", choices=("trainer", "foreach", "fused"), default="trainer")
    parser.add_argument("--malloc", choices=("trainer", "default"), default="trainer")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.malloc == "default":
        step_module._kept_freed_memory = False  # as if already decided: glibc's defaults stay
    device, dtype = torch.device("cpu"), torch.bfloat16 if args.precision == "bf16" else None
    torch.manual_seed(0)
    encoder = build_encoder(args.model, pooler="avg", dropout=0.1, max_length=32, mlp_only_train=False)
    method = SimCSE(MethodContext(encoder=encoder, loss=lambda a, b: info_nce(a, b, tau=0.05, hard_negative_alpha=1.0),
                                  augmentation=Dropout(DropoutSpec())), DROPOUT_SIMCSE)
    groups = parameter_groups(method.named_parameters(), 0.0)
    kind = implementation(device, dtype) if args.optimizer == "trainer" else {args.optimizer: True}
    optimizer = torch.optim.AdamW(groups, lr=3e-5, **kind)
    params = [p for group in groups for p in group["params"]]
    step = step_module.TrainStep(method, method.training_step, optimizer, params, 1.0,
                                 autocast=lambda: autocast(device, dtype))
    sentences = read_sentences(args.corpus, limit=args.batch_size * (args.steps + args.warmup))
    batches = [method.prepare(sentences[i : i + args.batch_size], method.rng)
               for i in range(0, len(sentences), args.batch_size)]
    method.train()
    rows = []
    for index, batch in enumerate(batches):
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        step(batch)
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
        if index >= args.warmup:
            rows.append((after.ru_minflt - before.ru_minflt, after.ru_utime - before.ru_utime,
                         after.ru_stime - before.ru_stime, wall))
    print(f"threads {torch.get_num_threads()}, precision {args.precision}, AdamW {kind}, malloc "
          f"{'kept' if step_module._kept_freed_memory else 'glibc defaults'}; load {os.getloadavg()[0]:.1f}")
    for faults, user, system, wall in rows:
        print(f"  page faults {faults:7d}  user {user:5.2f} s  system {system:5.2f} s  wall {wall:6.2f} s")
    print(f"median CPU s/step {statistics.median(u + s for _, u, s, _ in rows):.2f}, "
          f"wall {statistics.median(w for *_, w in rows):.2f}")


if __name__ == "__main__":
    main()
