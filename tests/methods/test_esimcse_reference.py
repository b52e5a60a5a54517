"""ESimCSE's training step against the official code's outputs: caskcsg/sentemb ESimCSE's own ``BertForCL``
(``cl_forward``: the momentum update before the keys, the queue term) driven by its own
``CLTrainer.compute_loss`` for three SGD steps, float64, no dropout, from a momentum encoder that starts apart
from the backbone (the official run's random start) or as its copy. Loss, every gradient (per tensor: sum and
sum of squares, the MLP's weight in full) and the queue after each step agree to 1e-10. The reference outputs were computed in a
scratch environment (tests/reference_data/esimcse_steps.json says how); tests/esimcse_reference_setup.py
is the shared set-up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from esimcse_reference_setup import BATCHES, LR, STARTS, attention, build, state_sha256

from cl_bench.methods.base import TextViews

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "reference_data" / "esimcse_steps.json").read_text())
TOLERANCE = 1e-10


@pytest.fixture(scope="module", params=STARTS)
def steps(request, tmp_path_factory) -> tuple[list[dict], list[dict]]:
    """(cl-bench's steps, the official steps) from one momentum start."""
    reference = REFERENCE[request.param]
    method, state = build(tmp_path_factory.mktemp("esimcse"), request.param)
    assert state_sha256(state) == reference["start_sha256"], "the start is not the one the reference ran from"
    method.momentum_update()  # the official cl_forward moves the momentum encoder before its first keys
    method.train()
    online = {f"bert.{n}": p for n, p in method.encoder.backbone.named_parameters()}
    online |= {f"mlp.{n}": p for n, p in method.encoder.mlp.named_parameters()}
    optimizer = torch.optim.SGD([p for p in method.parameters() if p.requires_grad], lr=LR)
    out = []
    for first, second in BATCHES:
        ids = torch.tensor(first + second)
        features = {"input_ids": ids, "attention_mask": torch.tensor(attention(first) + attention(second)),
                    "token_type_ids": torch.zeros_like(ids)}
        optimizer.zero_grad()
        loss = method.training_step(TextViews(len(first), features))["loss"]
        loss.backward()
        grads = {n: p.grad if p.grad is not None else torch.zeros_like(p) for n, p in online.items()}
        optimizer.step()
        method.on_after_step()
        out.append({"loss": loss.item(), "grads": grads, "queue": F.normalize(method.queued_keys(), dim=1)})
    return out, reference["steps"]


def test_loss_per_step_equals_the_official(steps) -> None:
    for ours, ref in zip(*steps, strict=True):
        assert abs(ours["loss"] - ref["loss"]) <= TOLERANCE


def test_every_gradient_equals_the_official(steps) -> None:
    for ours, ref in zip(*steps, strict=True):
        assert set(ours["grads"]) == set(ref["grad_sum"])
        for name, grad in ours["grads"].items():
            assert abs(grad.sum().item() - ref["grad_sum"][name]) <= TOLERANCE, name
            assert abs(grad.square().sum().item() - ref["grad_sq"][name]) <= TOLERANCE, name
        for name, full in ref["grad_full"].items():
            assert (ours["grads"][name] - torch.tensor(full, dtype=torch.float64)).abs().max() <= TOLERANCE, name


def test_queue_after_each_step_equals_the_official(steps) -> None:
    for ours, ref in zip(*steps, strict=True):
        expected = torch.tensor(ref["queue_after"], dtype=torch.float64)
        assert ours["queue"].shape == expected.shape
        assert (ours["queue"] - expected).abs().max() <= TOLERANCE
