"""The fixed set-up of tests/methods/test_esimcse_reference.py, shared with the scratch script that saved the start
weights for the official code: a tiny float64 BERT without dropout, cl-bench's ESimCSE on it, a momentum
encoder that starts either apart from the backbone (``random``: a second tiny BERT, as the official run's
random start) or as its copy (``pretrained``: the queue's keys then weigh in the loss), and three batches
of two views."""

from __future__ import annotations

import functools
from pathlib import Path

import torch
from conftest import build_tiny_bert

from cl_bench.config import yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.esimcse.modeling import ESimCSE
from cl_bench.models.encoder import build_encoder

MOMENTUM, NEG_SIZE, LR = 0.9, 4, 0.1
#: where the momentum encoder starts in each checked case
STARTS: tuple[str, ...] = ("random", "pretrained")
#: three steps: (first view, second view) rows of token ids ([CLS]=2, [SEP]=3, [PAD]=0), 3 sentences each
BATCHES = [
    ([[2, 10, 11, 12, 3, 0], [2, 13, 14, 3, 0, 0], [2, 15, 16, 17, 18, 3]],
     [[2, 10, 10, 11, 12, 3], [2, 13, 14, 14, 3, 0], [2, 15, 16, 17, 18, 3]]),
    ([[2, 20, 21, 3, 0, 0], [2, 22, 23, 24, 3, 0], [2, 25, 26, 27, 28, 3]],
     [[2, 20, 21, 21, 3, 0], [2, 22, 22, 23, 24, 3], [2, 25, 26, 27, 28, 3]]),
    ([[2, 30, 31, 32, 3, 0], [2, 33, 34, 3, 0, 0], [2, 35, 36, 37, 3, 0]],
     [[2, 30, 31, 32, 32, 3], [2, 33, 33, 34, 3, 0], [2, 35, 36, 37, 3, 0]]),
]


def attention(rows: list[list[int]]) -> list[list[int]]:
    return [[int(t != 0) for t in row] for row in rows]


def build(root: Path, start: str) -> tuple[ESimCSE, dict[str, torch.Tensor]]:
    """cl-bench's ESimCSE at the start the official code is given, and that start as a state dict in the
    official ``BertForCL``'s names (``bert.*``, ``mlp.*``, ``momentum_model.*``)."""
    backbone_dir = build_tiny_bert(root / "online", seed=0)
    start_dir = build_tiny_bert(root / "momentum_start", seed=1)
    torch.manual_seed(0)
    encoder = build_encoder(str(backbone_dir), pooler="cls", dropout=0.0, mlp_only_train=True, max_length=16)
    context = MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0), augmentation=None,
                            model_name_or_path=str(backbone_dir), seed=3)
    method = ESimCSE(context, yaml_spec("method", "esimcse", momentum=MOMENTUM, neg_size=NEG_SIZE)).double()
    from transformers import AutoModel

    if start == "random":
        momentum_start = AutoModel.from_pretrained(str(start_dir)).double().state_dict()
    else:
        momentum_start = {k: v.detach().clone() for k, v in method.encoder.backbone.state_dict().items()}
    method.key_backbone.load_state_dict(momentum_start)
    state = {f"bert.{k}": v for k, v in method.encoder.backbone.state_dict().items()}
    state |= {f"mlp.{k}": v for k, v in method.encoder.mlp.state_dict().items()}
    state |= {f"momentum_model.{k}": v for k, v in momentum_start.items()}
    return method, {k: v.detach().clone().contiguous() for k, v in state.items()}


def state_sha256(state: dict[str, torch.Tensor]) -> str:
    import hashlib

    return hashlib.sha256(b"".join(state[k].double().numpy().tobytes() for k in sorted(state)
                                   if "position_ids" not in k)).hexdigest()
