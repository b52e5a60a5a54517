"""Time cl-bench's SimCSE training step against a minimal plain PyTorch + transformers SimCSE step.

All kinds run on the same weights, batches (``--batch-size`` sentences = 2x views) and max length, with AdamW,
dropout, gradient clipping and the same precision, in one process, in interleaved rounds so that machine load
affects them alike:

* **plain**: tokenise in the step, forward, [CLS] + fresh MLP, cosine/tau cross-entropy, backward, clip,
  ``torch.optim.AdamW`` (torch's default implementation), ``loss.item()`` (a plain loop's per-step log);
* **cl-bench**: the Trainer's own step (``cl_bench.train.step.TrainStep``: the non-finite guard and loss on
  the device, fused AdamW on CUDA and under a CPU's bf16, the 4D padding mask; on a CPU glibc's malloc keeps freed
  memory, for the whole process, so the other kinds run with it too) on batches tokenised by ``--workers`` DataLoader workers
  into pinned memory and copied non-blocking (``cl_bench.data.loader.BatchLoader``), eager;
* **cl-bench, compiled**: the same with ``train.compile`` (the backbone compiled for static shapes on bucketed
  lengths; CUDA graphs on CUDA); ``--compile auto`` runs it on CUDA only (inductor on a CPU takes minutes);
* **sentence-transformers MNRL**: ``MultipleNegativesRankingLoss`` on a ``SentenceTransformer`` of the same
  backbone and [CLS] pooling, when sentence-transformers is installed.

``--precision bf16`` wraps the forward passes and losses in the autocast cl-bench's Trainer uses for
``train.precision=bf16`` (backward outside it, as there).

    python benchmarks/bench_train_step.py --model ../shared/models/all-MiniLM-L6-v2 \
        --corpus ../shared/data/corpus/wiki1m_for_simcse.head.txt
    # on a GPU: a randomly initialised bert-base (BertConfig() defaults) with MiniLM's uncased vocabulary,
    # the issue's two shapes (batch x max length)
    python benchmarks/bench_train_step.py --random-config bert-base --device cuda --precision bf16 --shapes 64x32 256x64

Prints the device, the fp32 and bf16 matmul peaks measured on it in the same run, then per shape and step
kind the median time per step (each round times ``--steps`` consecutive steps between two CUDA
synchronisations, so a step that runs ahead of the GPU is credited for it; median over ``--rounds`` rounds,
after an untimed round that compiles every bucket met), sentences/s, the achieved TFLOP/s (the encoder's
FLOPs from its config and the batches padded to their longest sentence, as the plain step runs them — a
bucket's extra padding is not counted — x3 for forward+backward: ``_common.encoder_flops``), the model FLOPs
utilisation (MFU) against the measured peak of the step's precision, and the throughput ratios against the
plain step (issue 37's targets, bert-base bf16 on a GPU: ratio >= 2.0 and MFU >= 10% at 64x32, MFU >= 30% at 256x64).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from _common import (
    RANDOM_CONFIGS,
    bench_device,
    device_description,
    encoder_flops,
    print_device_peaks,
    random_model_dir,
    synchronize,
)
from transformers import AutoModel, AutoTokenizer

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.data.loader import BatchLoader
from cl_bench.data.text import read_sentences
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.configuration import SimCSESpec
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder, quiet_transformers_bars
from cl_bench.train.compile import PadToBucket, compile_encoder, compile_mode, length_buckets
from cl_bench.train.precision import autocast, autocast_dtype
from cl_bench.train.step import TrainStep
from cl_bench.utils.optim import implementation

Step = Callable[[list[str]], float]
#: runs one round: the step on every batch, in order
Round = Callable[[int], None]


@dataclass
class StepKind:
    """One kind of training step under test: its label and how it runs a round over the batches."""

    label: str
    run_round: Round



#: conf/method/simcse.yaml's values (written out: the GPU image has no Hydra to read the YAML with cl-bench's catalog)
DROPOUT_SIMCSE = SimCSESpec(name="simcse", mlm_weight=0.0, mlm_probability=0.15, mlm_mode="clean", augment_both_views=True,
                            fixed_dropout_mask=False, select_with_mlp=False)


def sequential_rounds(step: Step, batches: list[list[str]]) -> Round:
    """A round of a step that takes sentences: each batch in turn (tokenised inside the step)."""

    def run_round(round_index: int) -> None:
        for batch in batches:
            step(batch)

    return run_round


def fixed_batches(batches: list[list[str]]) -> Callable[[Any, int, torch.Generator], Iterator[list[str]]]:
    """A ``Method.batches`` that yields the benchmark's batches as they are, every epoch."""

    def batches_fn(items: Any, batch_size: int, generator: torch.Generator) -> Iterator[list[str]]:
        return iter(batches)

    return batches_fn


def cl_bench_round(model_path: str, lr: float, device: torch.device, dtype: torch.dtype | None, max_length: int,
                   batches: list[list[str]], compiled: bool, workers: int) -> tuple[Round, TrainStep]:
    """cl-bench's Trainer step (:class:`TrainStep`) over the batches as its DataLoader workers prepare them."""
    encoder = build_encoder(model_path, pooler="cls", dropout=0.1, max_length=max_length, mlp_only_train=True)
    method = SimCSE(MethodContext(encoder=encoder, loss=lambda a, b: info_nce(a, b, tau=0.05, hard_negative_alpha=1.0), augmentation=Dropout(DropoutSpec())),
                    DROPOUT_SIMCSE)
    method.to(device)
    params = [p for p in method.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, **implementation(device, dtype))  # the Trainer's choice
    prepare = method.prepare
    if compiled:
        compile_encoder(method, compile_mode(device))
        prepare = PadToBucket(prepare, length_buckets(max_length), encoder.tokenizer.pad_token_id or 0)
    step = TrainStep(method, method.training_step, optimizer, params, 1.0, autocast=lambda: autocast(device, dtype))
    loader = BatchLoader([], fixed_batches(batches), prepare, len(batches[0]), seed=0, num_workers=workers,
                         pin_memory=device.type == "cuda")

    def run_round(round_index: int) -> None:
        method.train()
        for batch in loader.epoch(round_index):
            step(batch)
            method.on_after_step()
        step.flush()  # a log step: the one host read of the round

    return run_round, step


def mnrl_step_fn(model_path: str, lr: float, device: torch.device, dtype: torch.dtype | None,
                 max_length: int) -> Step | None:
    """sentence-transformers' MultipleNegativesRankingLoss step on the same backbone ([CLS] pooling), or None
    when sentence-transformers is not installed."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    try:  # sentence-transformers >= 6 moved its modules and losses
        from sentence_transformers.sentence_transformer import losses
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:
        from sentence_transformers import losses, models
    word = models.Transformer(model_path, max_seq_length=max_length)
    width = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    pooling = models.Pooling(width(), pooling_mode="cls")
    model = SentenceTransformer(modules=[word, pooling], device=str(device))
    loss_fn = losses.MultipleNegativesRankingLoss(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr)
    tokenize = getattr(model, "preprocess", None) or model.tokenize  # renamed in sentence-transformers 6

    def step(sentences: list[str]) -> float:
        model.train()
        features = []
        for _ in range(2):  # two views of each sentence, one forward pass each (as MNRL runs its columns)
            tokens = tokenize(sentences)
            features.append({k: v.to(device) if torch.is_tensor(v) else v for k, v in tokens.items()})
        with autocast(device, dtype):
            loss = loss_fn(features, None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step


class ShapeRecorder:
    """Records (rows, padded length) of every batch a backbone runs (a forward pre-hook), for the FLOP count."""

    def __init__(self, backbone: torch.nn.Module) -> None:
        self.batches: list[tuple[int, int]] = []
        backbone.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:  # inputs_embeds
            ids = kwargs["inputs_embeds"][..., 0]
        self.batches.append((int(ids.shape[0]), int(ids.shape[1])))


def plain_step_fn(model_path: str, lr: float, device: torch.device, dtype: torch.dtype | None,
                  max_length: int) -> tuple[Step, ShapeRecorder, Any]:
    """The reference: tokenize 2x, forward, [CLS] + fresh MLP, cosine/tau CE, AdamW step."""
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path).to(device)
    mlp = torch.nn.Sequential(torch.nn.Linear(model.config.hidden_size, model.config.hidden_size), torch.nn.Tanh()).to(device)
    params = list(model.parameters()) + list(mlp.parameters())
    optimizer = torch.optim.AdamW(params, lr=lr)
    shapes = ShapeRecorder(model)

    def step(sentences: list[str]) -> float:
        model.train()
        batch = tokenizer(sentences + sentences, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        batch = {key: value.to(device) for key, value in batch.items()}
        with autocast(device, dtype):
            z = mlp(model(**batch).last_hidden_state[:, 0])
            z1, z2 = z[: len(sentences)], z[len(sentences) :]
            sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / 0.05
            loss = F.cross_entropy(sim, torch.arange(len(sentences), device=device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step, shapes, model.config


def count_parameters(config: Any) -> float:
    """Millions of parameters of the backbone ``config`` describes (built on the meta device: no memory)."""
    with torch.device("meta"):
        return sum(p.numel() for p in AutoModel.from_config(config).parameters()) / 1e6


def default_corpus() -> str:
    """wiki1m's head under ``$CL_BENCH_DATA`` (else ../shared/data)."""
    return os.path.join(os.environ.get("CL_BENCH_DATA", "../shared/data"), "corpus", "wiki1m_for_simcse.head.txt")


def parse_shape(text: str) -> tuple[int, int]:
    """``BATCHxLENGTH`` (e.g. ``64x32``) as (batch size, max length)."""
    try:
        batch, length = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shapes: expected BATCHxLENGTH such as 64x32, got '{text}'") from None
    return batch, length


def bench_shape(args: argparse.Namespace, model_path: str, device: torch.device, dtype: torch.dtype | None,
                batch_size: int, max_length: int, peaks: dict[str, float] | None, label: str) -> dict[str, float]:
    """Build every step kind for one shape, time them in interleaved rounds, print the figures; the peaks."""
    sentences = read_sentences(args.corpus, limit=batch_size * args.steps)
    batches = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]
    batches = [batch for batch in batches if len(batch) == batch_size]
    compiled = args.compile == "on" or (args.compile == "auto" and device.type == "cuda")
    torch.manual_seed(0)
    plain, plain_shapes, config = plain_step_fn(model_path, 3e-5, device, dtype, max_length)
    kinds = [StepKind("plain PyTorch+transformers SimCSE step", sequential_rounds(plain, batches))]
    for compile_it in (False, True) if compiled else (False,):
        torch.manual_seed(0)
        run_round, _ = cl_bench_round(model_path, 3e-5, device, dtype, max_length, batches, compile_it, args.workers)
        kinds.append(StepKind("cl-bench SimCSE step" + (", compiled" if compile_it else ""), run_round))
    if not args.no_mnrl:
        torch.manual_seed(0)
        mnrl = mnrl_step_fn(model_path, 3e-5, device, dtype, max_length)
        if mnrl is None:
            print("sentence-transformers is not installed: no MultipleNegativesRankingLoss baseline", flush=True)
        else:
            kinds.append(StepKind("sentence-transformers MNRL step", sequential_rounds(mnrl, batches)))
    if peaks is None:
        peaks = print_device_peaks(device, config, args.peak_tokens)
        print(f"model {label}: {config.num_hidden_layers} layers, H {config.hidden_size}, "
              f"{count_parameters(config):.1f}M parameters (backbone)", flush=True)
    print(f"--- precision {args.precision}, batch {batch_size} ({2 * batch_size} views), max length {max_length}, "
          f"device {device}, {len(batches)} steps a round, {args.rounds} timed rounds, DataLoader workers "
          f"{args.workers} (cl-bench)", flush=True)
    # the FLOPs every kind is credited with: the batches padded to their longest sentence (the plain step's)
    plain_shapes.batches.clear()
    for kind in kinds:  # the untimed round: compilation of every bucket met, allocator and worker start-up
        synchronize(device)
        start = time.perf_counter()
        kind.run_round(0)
        synchronize(device)
        print(f"untimed first round (compilation included), {kind.label}: {time.perf_counter() - start:.2f} s",
              flush=True)
    flops = 3 * encoder_flops(config, plain_shapes.batches) / len(batches)
    times: dict[str, list[float]] = {kind.label: [] for kind in kinds}
    for round_index in range(1, args.rounds + 1):
        for kind in kinds if round_index % 2 else list(reversed(kinds)):
            synchronize(device)
            start = time.perf_counter()
            kind.run_round(round_index)
            synchronize(device)
            times[kind.label].append((time.perf_counter() - start) / len(batches))
    peak = peaks["bfloat16" if args.precision == "bf16" else "float32"]
    rates: dict[str, float] = {}
    for kind in kinds:
        median = statistics.median(times[kind.label])
        rates[kind.label] = batch_size / median
        tflops = flops / median / 1e12
        versus_bf16 = f"; {100 * tflops / peaks['bfloat16']:.1f}% of the bf16 peak" if args.precision == "fp32" else ""
        print(f"{kind.label:40s}: {median * 1000:8.2f} ms median, {rates[kind.label]:8.1f} sentences/s, "
              f"{tflops:.4g} TFLOP/s, MFU {100 * tflops / peak:.1f}% of the measured {args.precision} matmul peak "
              f"{peak:.4g} TFLOP/s{versus_bf16}", flush=True)
    plain_rate = rates[kinds[0].label]
    print(f"throughput ratio cl-bench/plain = {rates['cl-bench SimCSE step'] / plain_rate:.3f}  "
          "(target >= 2.0 for cl-bench's default step, bert-base bf16 64x32 on a GPU)")
    for kind in kinds[2:]:
        name = kind.label.replace(" SimCSE step", "").removesuffix(" step")  # "cl-bench, compiled", "... MNRL"
        print(f"throughput ratio {name}/plain = {rates[kind.label] / plain_rate:.3f}")
    return peaks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("CL_BENCH_MINILM", "../shared/models/all-MiniLM-L6-v2"),
                        help="the model; with --random-config only its tokenizer is used")
    parser.add_argument("--random-config", choices=sorted(RANDOM_CONFIGS),
                        help="train a randomly initialised BertConfig of this shape (bert-base: BertConfig() defaults)")
    parser.add_argument("--corpus", default=default_corpus())
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--shapes", nargs="+", type=parse_shape, metavar="BATCHxLENGTH",
                        help="several shapes in one run, e.g. 64x32 256x64 (instead of --batch-size/--max-length)")
    parser.add_argument("--steps", type=int, default=12, help="steps of each kind in a round (distinct batches)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (median), after one untimed round")
    parser.add_argument("--warmup", type=int, default=1,
                        help="kept for older commands: the untimed round (one pass over the batches) is the warm-up")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="as train.precision")
    parser.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                        help="also time cl-bench's compiled step (auto: on CUDA)")
    parser.add_argument("--workers", type=int, default=2, help="cl-bench's DataLoader workers (train.num_workers)")
    parser.add_argument("--no-mnrl", action="store_true", help="skip the sentence-transformers baseline")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--peak-tokens", type=int, default=8192, help="rows of the GEMM-peak shapes")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    quiet_transformers_bars()
    device = bench_device(args.device)
    dtype = autocast_dtype(args.precision, device)
    print(device_description(device), flush=True)
    shapes = args.shapes or [(args.batch_size, args.max_length)]
    label = f"random {args.random_config} (tokenizer {args.model})" if args.random_config else args.model
    with tempfile.TemporaryDirectory(prefix="cl-bench-random-") as scratch:
        model_path = random_model_dir(args.random_config, args.model, scratch) if args.random_config else args.model
        peaks = None
        for batch_size, max_length in shapes:
            peaks = bench_shape(args, model_path, device, dtype, batch_size, max_length, peaks, label)
    print(device_description(device))


if __name__ == "__main__":
    main()
