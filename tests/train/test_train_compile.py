"""Issue 37 item 1: ``train.compile``, a compiled backbone on bucketed sequence lengths, against the eager step.

The default suite checks the buckets, the padding and the compiled step's wiring with the ``aot_eager``
backend (forward and backward traced as inductor traces them, no code generated: seconds); the slow test runs
inductor itself for 50 steps (compiling takes a minute on a loaded 2-core machine). Dropout is 0 where
compiled and eager are compared: inductor draws its dropout masks from its own generator.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from cl_bench.augment.base import Dropout
from cl_bench.augment.specs import DropoutSpec
from cl_bench.config import yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.simcse.modeling import SimCSE
from cl_bench.models.encoder import build_encoder
from cl_bench.train.compile import (
    PadToBucket,
    bucket_of,
    compile_encoder,
    compile_setting,
    compile_wanted,
    length_buckets,
    pad_features,
)
from cl_bench.train.step import TrainStep

WORDS = "a dog plays in the park with red ball while the man sings an old song".split()


def _sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(2, 14))) for _ in range(count)]


def _simcse(tiny_bert: Path, dropout: float = 0.0) -> SimCSE:
    torch.manual_seed(0)
    encoder = build_encoder(str(tiny_bert), pooler="cls", dropout=dropout, max_length=32, mlp_only_train=True)
    return SimCSE(MethodContext(encoder=encoder, loss=lambda a, b: info_nce(a, b, tau=0.05, hard_negative_alpha=1.0), augmentation=Dropout(DropoutSpec())),
                  yaml_spec("method", "simcse"))


def test_length_buckets() -> None:
    assert length_buckets(32) == [8, 16, 24, 32]
    assert length_buckets(64) == [16, 32, 48, 64]
    assert length_buckets(20) == [8, 16, 20]
    assert length_buckets(512) == [128, 256, 384, 512]
    assert [bucket_of(n, [8, 16, 24, 32]) for n in (1, 8, 9, 31, 32, 40)] == [8, 8, 16, 32, 32, 40]


def test_compile_setting_and_auto() -> None:
    assert [compile_setting(v) for v in (True, "True", "false", False, " auto ")] == ["true", "true", "false",
                                                                                     "false", "auto"]
    with pytest.raises(ValueError, match=r"^train.compile: must be one of auto, true, false, got 'yes'$"):
        compile_setting("yes")
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert compile_wanted("auto", cuda, 2000) and not compile_wanted("auto", cuda, 1999)
    assert not compile_wanted("auto", cpu, 10**6) and compile_wanted("true", cpu, 1)


def test_padding_to_a_bucket_is_masked() -> None:
    features = {"input_ids": torch.tensor([[101, 7, 102], [101, 102, 0]]),
                "attention_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]),
                "token_type_ids": torch.zeros(2, 3, dtype=torch.long)}
    padded = pad_features(features, 8, pad_token_id=0)
    assert padded["input_ids"].shape == (2, 8) and padded["attention_mask"][:, 3:].sum() == 0
    assert torch.equal(padded["input_ids"][:, :3], features["input_ids"])
    with_layout = {**features, "prompt_layout": torch.zeros(2, 3, dtype=torch.long)}
    assert pad_features(with_layout, 8, 0) is with_layout  # an unknown per-token tensor: left as it is


def test_a_bucketed_batch_trains_as_the_unpadded_one(tiny_bert: Path) -> None:
    """The bucket's extra padding is masked: the same loss and gradients as the batch padded to its longest."""
    results = []
    for bucketed in (False, True):
        method = _simcse(tiny_bert)
        prepare = PadToBucket(method.prepare, length_buckets(32), 0) if bucketed else method.prepare
        batch = prepare(_sentences(6, 0), random.Random(0))
        assert batch.features["input_ids"].shape[1] in ((8, 16, 24, 32) if bucketed else range(33))
        loss = method.training_step(batch)["loss"]
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in method.parameters() if p.grad is not None]))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    for eager, padded in zip(results[0][1], results[1][1], strict=True):
        torch.testing.assert_close(eager, padded, rtol=1e-4, atol=1e-6)


def _losses(tiny_bert: Path, steps: int, backend: str | None) -> tuple[list[float], dict[str, torch.Tensor]]:
    """Losses of ``steps`` training steps (compiled with ``backend`` on buckets, or eager), and the last gradients."""
    method = _simcse(tiny_bert)
    prepare = method.prepare
    if backend is not None:
        compile_encoder(method, backend=backend)
        prepare = PadToBucket(prepare, length_buckets(32), 0)
    named = [(name, p) for name, p in method.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    optimizer = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    grads: dict[str, torch.Tensor] = {}

    def forward(batch: object) -> dict[str, torch.Tensor]:
        return method.training_step(batch)

    def backward(loss: torch.Tensor) -> None:
        loss.backward()
        # an unused output (BERT's own pooler) has no gradient eagerly, a zero one from a compiled graph
        grads.update({name: torch.zeros_like(p) if p.grad is None else p.grad.clone() for name, p in named})

    step = TrainStep(method, forward, optimizer, params, 1.0, backward=backward)
    method.train()
    losses = [float(step(prepare(_sentences(8, i), random.Random(i)))[0]["loss"].detach()) for i in range(steps)]
    return losses, grads


def test_the_compiled_step_follows_the_eager_one(tiny_bert: Path) -> None:
    """aot_eager: the compiled forward and backward graphs on buckets, 4 steps, against eager."""
    eager, eager_grads = _losses(tiny_bert, 4, None)
    compiled, compiled_grads = _losses(tiny_bert, 4, "aot_eager")
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=1e-4, atol=1e-5)
    assert compiled_grads.keys() == eager_grads.keys()
    for name, grad in compiled_grads.items():
        torch.testing.assert_close(grad, eager_grads[name], rtol=1e-3, atol=1e-5, msg=name)


def test_evaluation_runs_the_eager_backbone(tiny_bert: Path) -> None:
    """Only the training forward pass is compiled: evaluation's varying lengths never reach the compiled graphs."""
    method = _simcse(tiny_bert)
    calls: list[int] = []
    compile_encoder(method, backend="aot_eager")
    compiled = method.encoder.compiled_backbone
    method.encoder.compiled_backbone = lambda **kwargs: calls.append(1) or compiled(**kwargs)
    method.eval()
    method.encoder.encode(["a dog", "a man sings"])
    assert calls == []
    method.train()
    method.training_step(_sentences(4, 0))
    assert calls == [1]


@pytest.mark.slow
def test_fifty_inductor_steps_follow_the_eager_curve(tiny_bert: Path) -> None:
    """inductor (generated kernels), 50 steps on bucketed lengths: the loss curve within bf16 tolerance of eager."""
    eager, _ = _losses(tiny_bert, 50, None)
    compiled, _ = _losses(tiny_bert, 50, "inductor")
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=2**-8, atol=1e-3)


def test_the_compile_values_are_the_keys_declared_ones() -> None:
    """train/compile.py keeps its own copy (the GPU image lacks omegaconf, which run_specs imports): it must equal
    the declaration the preflight checks."""
    from cl_bench.run_specs import COMPILE_VALUES
    from cl_bench.train.compile import COMPILE_SETTINGS

    assert COMPILE_SETTINGS == COMPILE_VALUES
