"""After-step hooks follow only the steps the optimizer took (issue 28, point 10).

Under fp16 the GradScaler skips a step whose gradients overflowed; BYOL's momentum target, the memory
bank and SwAV's prototype-freeze counter must then stay where they are. fp16 is CUDA-only, so a fake
scaler with the GradScaler's interface (it lowers its scale exactly when it skips) drives the real
``Trainer.step`` on the CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import hooks_trainer

from cl_bench.train.loop import Trainer, scaler_step


class FakeScaler:
    """GradScaler's interface on the CPU: ``skip=True`` behaves as an overflow (no step, scale halved)."""

    def __init__(self, skip: bool) -> None:
        self.skip, self.scale_value, self.steps = skip, 65536.0, 0

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        pass

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if not self.skip:
            optimizer.step()
            self.steps += 1

    def update(self) -> None:
        if self.skip:
            self.scale_value /= 2

    def get_scale(self) -> float:
        return self.scale_value


def _snapshot(trainer: Trainer, method: str) -> dict[str, torch.Tensor]:
    m = trainer.method
    if method == "byol":
        # parameters only: the target projector's BatchNorm running statistics move in its forward pass
        return {k: v.detach().clone() for k, v in m.target_encoder.named_parameters()} | {
            f"p.{k}": v.detach().clone() for k, v in m.target_projector.named_parameters()}
    if method == "memory_bank":
        return {"bank": m.bank.clone()}
    return {"steps_done": m.steps_done.clone()}


@pytest.mark.parametrize(("method", "extra"), [
    ("byol", ("method.projection=[16,8]", "method.momentum=0.5")),
    ("memory_bank", ("method.feature_dim=8", "method.num_noise=4")),
    ("swav", ("method.projection=[16,8]", "method.num_prototypes=5")),
])
def test_a_skipped_fp16_step_runs_no_after_step_hook(method: str, extra: tuple[str, ...], tiny_bert: Path,
                                                     data_dir: Path, tmp_path: Path) -> None:
    trainer = hooks_trainer(method, tiny_bert, data_dir, tmp_path, *extra)
    batches = iter(trainer.data.epoch(0, 0))
    trainer.scaler = FakeScaler(skip=True)
    before = _snapshot(trainer, method)
    weights = {k: v.clone() for k, v in trainer.method.encoder.state_dict().items()}
    trainer.step(next(batches))
    assert trainer.scaler.steps == 0 and trainer.state.step == 1
    assert all(torch.equal(weights[k], v) for k, v in trainer.method.encoder.state_dict().items())  # no update
    after = _snapshot(trainer, method)
    assert all(torch.equal(before[k], after[k]) for k in before), method  # the hook did not run
    # a step the scaler takes runs the hook: the target/bank/counter move
    trainer.scaler = FakeScaler(skip=False)
    trainer.step(next(batches))
    assert trainer.scaler.steps == 1
    moved = _snapshot(trainer, method)
    assert any(not torch.equal(after[k], moved[k]) for k in after), method


def test_scaler_step_reports_whether_the_optimizer_stepped() -> None:
    param = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([param], lr=0.1)
    param.grad = torch.ones(2)
    assert scaler_step(FakeScaler(skip=False), optimizer) is True and torch.allclose(param, torch.full((2,), 0.9))
    assert scaler_step(FakeScaler(skip=True), optimizer) is False and torch.allclose(param, torch.full((2,), 0.9))
    real = torch.amp.GradScaler("cpu")  # torch's own scaler on the CPU: an inf gradient is skipped, scale halved
    param.grad = torch.tensor([float("inf"), 1.0])
    real.scale(param.sum())
    assert scaler_step(real, optimizer) is False and torch.allclose(param, torch.full((2,), 0.9))
