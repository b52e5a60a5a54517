"""Time cl-bench's SimCSE training step against a minimal plain PyTorch + transformers SimCSE step.

Both run on the same model, batch (64 sentences = 128 views) and max length (32), with the same
optimizer (AdamW) and dropout, interleaved in one process so machine load affects both alike.

    python benchmarks/bench_train_step.py --model ../shared/models/all-MiniLM-L6-v2 \
        --corpus ../shared/data/corpus/wiki1m_for_simcse.head.txt

Prints the CPU and load, the median step time of each and the ratio plain/cl-bench (>= 1.0 is the target).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from _common import print_machine
from transformers import AutoModel, AutoTokenizer

from cl_bench.data.text import read_sentences
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse import SimCSE
from cl_bench.models.encoder import build_encoder


def plain_step_fn(model_path: str, lr: float):
    """The reference: tokenize 2x, forward, [CLS] + fresh MLP, cosine/tau CE, AdamW step."""
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path)
    mlp = torch.nn.Sequential(torch.nn.Linear(model.config.hidden_size, model.config.hidden_size), torch.nn.Tanh())
    params = list(model.parameters()) + list(mlp.parameters())
    optimizer = torch.optim.AdamW(params, lr=lr)

    def step(sentences: list[str]) -> float:
        model.train()
        batch = tokenizer(sentences + sentences, padding=True, truncation=True, max_length=32, return_tensors="pt")
        z = mlp(model(**batch).last_hidden_state[:, 0])
        z1, z2 = z[: len(sentences)], z[len(sentences) :]
        sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / 0.05
        loss = F.cross_entropy(sim, torch.arange(len(sentences)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step


def cl_bench_step_fn(model_path: str, lr: float):
    """cl-bench's SimCSE method and the loop's optimizer step (AdamW, clipping, zero_grad)."""
    encoder = build_encoder(model_path, pooler="cls", dropout=0.1, max_length=32, mlp_only_train=True)
    method = SimCSE(MethodContext(encoder=encoder, loss=lambda a, b: info_nce(a, b, tau=0.05)))
    params = [p for p in method.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr)

    def step(sentences: list[str]) -> float:
        method.train()
        loss = method.training_step(sentences)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        method.on_after_step()
        return loss.item()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    print_machine()
    sentences = read_sentences(args.corpus, limit=args.batch_size * (args.steps + args.warmup))
    batches = [sentences[i : i + args.batch_size] for i in range(0, len(sentences), args.batch_size)]
    torch.manual_seed(0)
    plain = plain_step_fn(args.model, 3e-5)
    torch.manual_seed(0)
    ours = cl_bench_step_fn(args.model, 3e-5)
    times: dict[str, list[float]] = {"plain": [], "cl-bench": []}
    for i, batch in enumerate(batches):
        for name, fn in (("plain", plain), ("cl-bench", ours)) if i % 2 == 0 else (("cl-bench", ours), ("plain", plain)):
            start = time.perf_counter()
            fn(batch)
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)
    plain_median, ours_median = statistics.median(times["plain"]), statistics.median(times["cl-bench"])
    print(f"threads={torch.get_num_threads()} batch={args.batch_size} max_len=32 steps={len(times['plain'])}")
    print(f"plain PyTorch+transformers SimCSE step: {plain_median * 1000:.0f} ms (median)")
    print(f"cl-bench SimCSE step:                   {ours_median * 1000:.0f} ms (median)")
    print(f"speed ratio plain/cl-bench = {plain_median / ours_median:.3f}  (target >= 1.0)")


if __name__ == "__main__":
    main()
