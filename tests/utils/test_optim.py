"""train.adam_bias_correction: AdamW as torch has it, or transformers' AdamW(correct_bias=False)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from omegaconf import OmegaConf

from cl_bench.train.optim import AdamWNoBiasCorrection, build_optimizer, implementation


def _train_cfg(bias_correction: bool, weight_decay: float = 0.0) -> OmegaConf:
    return OmegaConf.create({
        "lr": 0.1, "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_eps": 1e-7,
        "weight_decay": weight_decay, "adam_bias_correction": bias_correction,
    })


def _steps(optimizer: torch.optim.Optimizer, param: torch.nn.Parameter, grads: list[float]) -> None:
    for grad in grads:
        param.grad = torch.tensor([grad])
        optimizer.step()


def test_no_bias_correction_matches_a_hand_computation() -> None:
    """Two steps with weight decay, written out from the update rule (transformers' correct_bias=False)."""
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-7, 0.01
    param = torch.nn.Parameter(torch.tensor([1.0]))
    optimizer = AdamWNoBiasCorrection([param], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    _steps(optimizer, param, [0.5, -0.2])

    p, m, v = 1.0, 0.0, 0.0
    for g in (0.5, -0.2):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * m / (math.sqrt(v) + eps)
        p = p - lr * wd * p
    assert param.item() == pytest.approx(p, rel=1e-6)
    # the first step alone is lr * 0.1 / sqrt(0.001) = 3.16 lr, not Adam's lr
    assert p != pytest.approx(1.0 - 0.1 - 0.1 * 0.01, rel=1e-3)


def test_the_switch_picks_the_optimiser() -> None:
    model = torch.nn.Linear(3, 2)
    corrected = build_optimizer(model.named_parameters(), _train_cfg(True))
    uncorrected = build_optimizer(model.named_parameters(), _train_cfg(False))
    assert type(corrected) is torch.optim.AdamW
    assert type(uncorrected) is AdamWNoBiasCorrection
    assert uncorrected.defaults["eps"] == 1e-7


def test_bias_correction_changes_the_first_update() -> None:
    """With correction the first step is lr * sign(g); without it lr * (1 - b1) / sqrt(1 - b2)."""
    steps = {}
    for correction in (True, False):
        param = torch.nn.Parameter(torch.tensor([0.0]))
        optimizer = build_optimizer([("w", param)], _train_cfg(correction))
        _steps(optimizer, param, [1.0])
        steps[correction] = -param.item()
    assert steps[True] == pytest.approx(0.1, rel=1e-4)
    assert steps[False] == pytest.approx(0.1 * 0.1 / math.sqrt(0.001), rel=1e-4)


def test_biases_and_layer_norm_are_not_decayed() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LayerNorm(3))
    optimizer = build_optimizer(model.named_parameters(), _train_cfg(False, weight_decay=0.1))
    decayed, undecayed = optimizer.param_groups
    assert (decayed["weight_decay"], undecayed["weight_decay"]) == (0.1, 0.0)
    assert [p.shape for p in decayed["params"]] == [torch.Size([3, 3])]
    assert len(undecayed["params"]) == 3  # linear bias, LayerNorm weight and bias


def test_optimiser_state_round_trips() -> None:
    """A resumed run continues from the saved moments (the checkpoint stores optimizer.state_dict())."""
    param = torch.nn.Parameter(torch.tensor([1.0, -1.0]))
    optimizer = AdamWNoBiasCorrection([param], lr=0.01)
    param.grad = torch.tensor([0.3, -0.3])
    optimizer.step()
    clone = torch.nn.Parameter(param.detach().clone())
    resumed = AdamWNoBiasCorrection([clone], lr=0.01)
    resumed.load_state_dict(copy.deepcopy(optimizer.state_dict()))  # as torch.save/load would
    param.grad = clone.grad = torch.tensor([0.1, 0.2])
    optimizer.step()
    resumed.step()
    assert torch.equal(param, clone)


@pytest.mark.parametrize(("preset", "eps"), [("is_bert", 1e-7), ("declutr_small", 1e-6)])
def test_presets_reach_the_loop_optimiser(preset: str, eps: float, tiny_bert, data_dir) -> None:
    """The IS-BERT and DeCLUTR presets train with transformers' AdamW(correct_bias=False), as their code."""
    import os

    from hydra import compose, initialize_config_dir

    from cl_bench.commands.cli import CONF_DIR
    from cl_bench.train.loop import make_optimizer

    os.environ["CL_BENCH_DATA"] = str(data_dir)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={preset}", f"model.name_or_path={tiny_bert}"])
    optimizer = make_optimizer(torch.nn.Linear(3, 2), cfg.train)  # the loop's call, on a stand-in module
    assert type(optimizer) is AdamWNoBiasCorrection and optimizer.defaults["eps"] == eps


@pytest.mark.parametrize(("device", "dtype", "kind"), [
    ("cuda", None, "fused"), ("cuda", torch.bfloat16, "fused"),
    ("cpu", torch.bfloat16, "fused"), ("cpu", None, "foreach"),
])
def test_the_adamw_implementation(device: str, dtype: torch.dtype | None, kind: str) -> None:
    """Fused on CUDA and under a CPU's bf16 autocast; foreach for fp32 on a CPU (fused rounds fp32 differently)."""
    assert implementation(torch.device(device), dtype) == {kind: True}


def test_build_optimizer_takes_the_autocast_dtype() -> None:
    param = torch.nn.Parameter(torch.ones(3))
    bf16 = build_optimizer([("w", param)], _train_cfg(True), autocast_dtype=torch.bfloat16)
    fp32 = build_optimizer([("w", param)], _train_cfg(True))
    assert bf16.defaults["fused"] and not fp32.defaults.get("fused") and fp32.defaults["foreach"]


def test_fused_and_foreach_differ_by_rounding_only() -> None:
    """What the CPU's bf16 path changes: the same AdamW update within fp32 rounding, not bit for bit (why fp32
    keeps foreach)."""
    torch.manual_seed(0)
    start = torch.randn(256, 64)
    results = []
    for kind in ({"foreach": True}, {"fused": True}):
        param = torch.nn.Parameter(start.clone())
        optimizer = torch.optim.AdamW([param], lr=3e-5, weight_decay=0.01, **kind)
        generator = torch.Generator().manual_seed(1)
        for _ in range(10):
            param.grad = torch.randn(param.shape, generator=generator) * 1e-3
            optimizer.step()
        results.append(param.detach().clone())
    torch.testing.assert_close(results[0], results[1], rtol=1e-6, atol=1e-7)
