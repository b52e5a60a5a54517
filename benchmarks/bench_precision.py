"""The SimCSE training step with ``train.precision=bf16`` and ``train.compile=true`` against the fp32
eager step, in one run, with the CPU's bf16/AMX flags printed.

    python benchmarks/bench_precision.py --model ../shared/models/all-MiniLM-L6-v2 \
        --corpus ../shared/data/corpus/wiki1m_for_simcse.head.txt

Every variant starts from the same weights and trains on the same batches (64 sentences, max length
32); the variants take turns step by step so that machine load hits them alike. Compilation happens
in the warm-up steps, which are not timed. Prints the median step time of each variant, its speed-up
over fp32 eager, and the first step's loss (bf16 changes the numerics; fp32 compiled should not).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _common import print_machine

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.data.text import read_sentences
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.configuration import SimCSESpec
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder
from cl_bench.train.compile import PadToBucket, compile_encoder, length_buckets
from cl_bench.train.precision import autocast, autocast_dtype
from cl_bench.train.step import keep_freed_memory
from cl_bench.utils.optim import implementation

VARIANTS = {  # name: (train.precision, train.compile)
    "fp32 eager": ("fp32", False),
    "bf16 eager": ("bf16", False),
    "fp32 compiled": ("fp32", True),
    "bf16 compiled": ("bf16", True),
}



#: conf/method/simcse.yaml's values (written out: the GPU image has no Hydra to read the YAML with cl-bench's catalog)
DROPOUT_SIMCSE = SimCSESpec(name="simcse", mlm_weight=0.0, mlm_probability=0.15, mlm_mode="clean", augment_both_views=True,
                            fixed_dropout_mask=False, select_with_mlp=False)


def step_fn(model_path: str, precision: str, compiled: bool):  # noqa: ANN201
    """cl-bench's SimCSE step under the given precision and compilation (the Trainer's own helpers)."""
    torch.manual_seed(0)
    encoder = build_encoder(model_path, pooler="cls", dropout=0.1, max_length=32, mlp_only_train=True)
    method = SimCSE(MethodContext(encoder=encoder, loss=lambda a, b: info_nce(a, b, tau=0.05, hard_negative_alpha=1.0), augmentation=Dropout(DropoutSpec())),
                    DROPOUT_SIMCSE)
    prepare = None
    if compiled:  # as the Trainer compiles: static shapes, batches padded to a few length buckets
        compile_encoder(method)
        prepare = PadToBucket(method.prepare, length_buckets(32), encoder.tokenizer.pad_token_id or 0)
    device = torch.device("cpu")
    dtype = autocast_dtype(precision, device)
    params = [p for p in method.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=3e-5, **implementation(device, dtype))  # the Trainer's choice
    keep_freed_memory()  # as the Trainer's CPU step (cl_bench/train/step.py)

    def step(sentences: list[str]) -> float:
        method.train()
        with autocast(device, dtype):
            loss = method.training_step(sentences if prepare is None else prepare(sentences, method.rng))["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    sentences = read_sentences(args.corpus, limit=args.batch_size * (args.steps + args.warmup))
    batches = [sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]
    steps = {name: step_fn(args.model, *variant) for name, variant in VARIANTS.items()}
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    first_loss: dict[str, float] = {}
    for i, batch in enumerate(batches):
        order = list(steps) if i % 2 == 0 else list(reversed(steps))
        for name in order:
            torch.manual_seed(1000 + i)  # the same dropout masks for every variant
            start = time.perf_counter()
            loss = steps[name](batch)
            if i == 0:
                first_loss[name] = loss
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)
    reference = statistics.median(times["fp32 eager"])
    print(f"SimCSE step, MiniLM, batch {args.batch_size}, max length 32, {len(times['fp32 eager'])} timed steps")
    for name in VARIANTS:
        median = statistics.median(times[name])
        print(f"{name:14s} {median * 1000:7.0f} ms  speed-up {reference / median:5.2f}x  first loss {first_loss[name]:.5f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in __import__('os').getloadavg())}")


if __name__ == "__main__":
    main()
