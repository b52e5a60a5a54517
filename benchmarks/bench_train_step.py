"""Time cl-bench's SimCSE training step against a minimal plain PyTorch + transformers SimCSE step.

Both run on the same weights, batch (64 sentences = 128 views) and max length (32), with the same
optimizer (AdamW), dropout, gradient clipping and precision, interleaved in one process so machine load
affects both alike. ``--precision bf16`` wraps both forward passes and losses in the autocast cl-bench's
Trainer uses for ``train.precision=bf16`` (``cl_bench.train.precision.autocast``; backward outside it, as there).
Both tokenise in the timed step (cl-bench's data loader would do it in its workers).

    python benchmarks/bench_train_step.py --model ../shared/models/all-MiniLM-L6-v2 \
        --corpus ../shared/data/corpus/wiki1m_for_simcse.head.txt
    # on a GPU: a randomly initialised bert-base (BertConfig() defaults) with MiniLM's uncased vocabulary
    python benchmarks/bench_train_step.py --random-config bert-base --device cuda --precision bf16

Prints the device (GPU name, torch/CUDA versions), the fp32 and bf16 matmul peaks measured on it in the
same run, then per step kind the median step time (CUDA-synchronised), sentences/s, the achieved TFLOP/s
(the encoder's FLOPs from its config and the padded token counts of the batches run, x3 for
forward+backward: ``_common.encoder_flops``) and the model FLOPs utilisation (MFU) against the measured
peak of the step's precision, and the throughput ratio cl-bench/plain (target >= 0.95).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
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
from cl_bench.data.text import read_sentences
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse import SimCSE
from cl_bench.models.encoder import build_encoder, quiet_transformers_bars
from cl_bench.train.precision import autocast, autocast_dtype

Step = Callable[[list[str]], float]


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


def cl_bench_step_fn(model_path: str, lr: float, device: torch.device, dtype: torch.dtype | None,
                     max_length: int) -> tuple[Step, ShapeRecorder]:
    """cl-bench's SimCSE method and the Trainer's step (autocast around the forward, AdamW, clipping, zero_grad)."""
    encoder = build_encoder(model_path, pooler="cls", dropout=0.1, max_length=max_length, mlp_only_train=True)
    method = SimCSE(MethodContext(encoder=encoder, loss=lambda a, b: info_nce(a, b, tau=0.05), augmentation=Dropout()))
    method.to(device)
    params = [p for p in method.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr)
    shapes = ShapeRecorder(encoder.backbone)

    def step(sentences: list[str]) -> float:
        method.train()
        with autocast(device, dtype):
            loss = method.training_step(sentences)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        method.on_after_step()
        return loss.item()

    return step, shapes


def count_parameters(config: Any) -> float:
    """Millions of parameters of the backbone ``config`` describes (built on the meta device: no memory)."""
    with torch.device("meta"):
        return sum(p.numel() for p in AutoModel.from_config(config).parameters()) / 1e6


def default_corpus() -> str:
    """wiki1m's head under ``$CL_BENCH_DATA`` (else ../shared/data)."""
    return os.path.join(os.environ.get("CL_BENCH_DATA", "../shared/data"), "corpus", "wiki1m_for_simcse.head.txt")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("CL_BENCH_MINILM", "../shared/models/all-MiniLM-L6-v2"),
                        help="the model; with --random-config only its tokenizer is used")
    parser.add_argument("--random-config", choices=sorted(RANDOM_CONFIGS),
                        help="train a randomly initialised BertConfig of this shape (bert-base: BertConfig() defaults)")
    parser.add_argument("--corpus", default=default_corpus())
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=12, help="timed steps of each kind")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="as train.precision")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--peak-tokens", type=int, default=8192, help="rows of the GEMM-peak shapes")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    quiet_transformers_bars()
    device = bench_device(args.device)
    dtype = autocast_dtype(args.precision, device)
    print(device_description(device), flush=True)
    sentences = read_sentences(args.corpus, limit=args.batch_size * (args.steps + args.warmup))
    batches = [sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]
    with tempfile.TemporaryDirectory(prefix="cl-bench-random-") as scratch:
        model_path = random_model_dir(args.random_config, args.model, scratch) if args.random_config else args.model
        torch.manual_seed(0)
        plain, plain_shapes, config = plain_step_fn(model_path, 3e-5, device, dtype, args.max_length)
        torch.manual_seed(0)
        ours, our_shapes = cl_bench_step_fn(model_path, 3e-5, device, dtype, args.max_length)
    peaks = print_device_peaks(device, config, args.peak_tokens)
    label = f"random {args.random_config} (tokenizer {args.model})" if args.random_config else args.model
    print(f"model {label}: {config.num_hidden_layers} layers, H {config.hidden_size}, {count_parameters(config):.1f}M "
          f"parameters (backbone); "
          f"precision {args.precision}, batch {args.batch_size} ({2 * args.batch_size} views), "
          f"max length {args.max_length}, device {device}", flush=True)
    steps: dict[str, tuple[Step, ShapeRecorder]] = {"plain": (plain, plain_shapes), "cl-bench": (ours, our_shapes)}
    times: dict[str, list[float]] = {name: [] for name in steps}
    timed_shapes: dict[str, list[tuple[int, int]]] = {name: [] for name in steps}
    for i, batch in enumerate(batches):
        for name in (list(steps) if i % 2 == 0 else list(reversed(steps))):
            fn, shapes = steps[name]
            shapes.batches.clear()
            synchronize(device)
            start = time.perf_counter()
            fn(batch)
            synchronize(device)
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)
                timed_shapes[name] += shapes.batches
    peak = peaks["bfloat16" if args.precision == "bf16" else "float32"]
    rates: dict[str, float] = {}
    print(f"{len(times['plain'])} timed steps of each kind (after {args.warmup} warm-up), interleaved")
    for name, label in (("plain", "plain PyTorch+transformers SimCSE step"), ("cl-bench", "cl-bench SimCSE step")):
        median = statistics.median(times[name])
        rates[name] = args.batch_size / median
        # forward + backward = 3x the forward's matrix products, per step (the recorded batches of all timed steps)
        flops = 3 * encoder_flops(config, timed_shapes[name]) / len(times[name])
        tflops = flops / median / 1e12
        versus_bf16 = f"; {100 * tflops / peaks['bfloat16']:.1f}% of the bf16 peak" if args.precision == "fp32" else ""
        print(f"{label:40s}: {median * 1000:8.1f} ms median, {rates[name]:8.1f} sentences/s, "
              f"{tflops:.4g} TFLOP/s, MFU {100 * tflops / peak:.1f}% of the measured {args.precision} matmul peak "
              f"{peak:.4g} TFLOP/s{versus_bf16}", flush=True)
    print(f"throughput ratio cl-bench/plain = {rates['cl-bench'] / rates['plain']:.3f}  (target >= 0.95)")
    print(device_description(device))


if __name__ == "__main__":
    main()
