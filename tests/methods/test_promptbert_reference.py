"""PromptBERT (run.sh "unsup-bert") against the official code's outputs: kongds/Prompt-BERT's own argument
defaults, template parsing, ``prepare_features`` and ``BertForCL`` (``cl_forward`` with the template denoising
``get_delta``; ``sentemb_forward`` for the trainer's dev embedding), run in a scratch environment on
all-MiniLM-L6-v2 in float64 without dropout (tests/reference_data/promptbert_step.json says how). The token ids,
the loss, every gradient (per tensor: sum and sum of squares; part of the MLP's in full) and the dev embedding
that ``method.dev_embedding=trainer`` selects on agree to 1e-10."""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import pytest
import torch
from conftest import minilm_path

from cl_bench.config import yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.promptbert.modeling import PromptBERT
from cl_bench.models.encoder import build_encoder

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "reference_data" / "promptbert_step.json").read_text())
TOLERANCE = 1e-10
TAU = 0.5  # the reference ran with --temp 0.5 (run.sh: 0.05) so that loss and gradients are far from 0


@pytest.fixture(scope="module")
def method() -> PromptBERT:
    encoder = build_encoder(str(minilm_path()), pooler="cls", dropout=0.0, max_length=32)
    context = MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=TAU, hard_negative_alpha=1.0), max_length=32)
    method = PromptBERT(context, yaml_spec("method", "promptbert", dev_embedding="trainer")).double()
    generator = torch.Generator().manual_seed(0)  # the reference's MLP values
    hidden = encoder.hidden_size
    with torch.no_grad():
        method.head.dense.weight.copy_(torch.randn(hidden, hidden, generator=generator, dtype=torch.float64) * 0.02)
        method.head.dense.bias.copy_(torch.randn(hidden, generator=generator, dtype=torch.float64) * 0.02)
    return method


@pytest.fixture(scope="module")
def step(method: PromptBERT) -> dict:
    method.train()
    views = method.prepare(REFERENCE["sentences"], random.Random(0))
    method.zero_grad()
    loss = method.training_step(views)["loss"]
    loss.backward()
    online = {f"bert.{n}": p for n, p in method.encoder.backbone.named_parameters()}
    online |= {f"mlp.{n}": p for n, p in method.head.named_parameters()}
    grads = {n: p.grad if p.grad is not None else torch.zeros_like(p) for n, p in online.items()}
    return {"views": views, "loss": loss.item(), "grads": grads}


def test_token_ids_equal_prepare_features(step: dict) -> None:
    n = len(REFERENCE["sentences"])
    features = step["views"].features
    for row, pair in enumerate(REFERENCE["input_ids"]):
        for view, expected in enumerate(pair):
            ids = features["input_ids"][view * n + row]
            mask = features["attention_mask"][view * n + row].bool()
            assert ids[mask].tolist() == [t for t in expected if t != 0]


def test_loss_and_every_gradient_equal_cl_forward(step: dict) -> None:
    assert abs(step["loss"] - REFERENCE["loss"]) <= TOLERANCE
    assert set(step["grads"]) == set(REFERENCE["grad_sum"])
    for name, grad in step["grads"].items():
        assert abs(grad.sum().item() - REFERENCE["grad_sum"][name]) <= TOLERANCE, name
        assert abs(grad.square().sum().item() - REFERENCE["grad_sq"][name]) <= TOLERANCE, name
    rows = torch.tensor(REFERENCE["grad_full"]["mlp.dense.weight[:4]"], dtype=torch.float64)
    assert (step["grads"]["mlp.dense.weight"][:4] - rows).abs().max() <= TOLERANCE


def test_trainer_dev_embedding_equals_sentemb_forward(method: PromptBERT, step: dict) -> None:
    method.eval()
    selection = method.selection_encoder()
    with torch.no_grad():
        got = selection(selection.tokenize(REFERENCE["dev_sentences"], max_length=None))
    expected = torch.tensor(REFERENCE["dev_embedding"], dtype=torch.float64)
    assert (got - expected).abs().max().item() <= TOLERANCE
