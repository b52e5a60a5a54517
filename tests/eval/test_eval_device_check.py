"""``eval.precision=bf16`` is checked on the device evaluation will encode on (``train.device``), before any model
loads: on a GPU machine with ``train.device=cpu`` and a CPU without bf16 units, the run used to pass validation
(the check looked at the GPU) and fail at its first evaluation, after training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import ConfigError, preflight
from cl_bench.eval import EvalConfigError, EvalOptions, check_eval_config
from cl_bench.models import inference


@pytest.fixture()
def gpu_machine_without_cpu_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with an Ampere-or-later GPU and a CPU without avx512_bf16/amx_bf16."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(inference, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))


@pytest.mark.usefixtures("gpu_machine_without_cpu_bf16")
def test_bf16_is_checked_on_train_device(data_dir: Path) -> None:
    check_eval_config(data_dir, ["stsb"], options=EvalOptions(precision="bf16"))  # auto: the GPU, which has bf16
    check_eval_config(data_dir, ["stsb"], eval_device="cuda", options=EvalOptions(precision="bf16"))
    with pytest.raises(EvalConfigError, match=r"^eval\.precision: bf16 needs a CPU with avx512_bf16 or amx_bf16"):
        check_eval_config(data_dir, ["stsb"], eval_device="cpu", options=EvalOptions(precision="bf16"))
    check_eval_config(data_dir, ["stsb"], eval_device="cpu", options=EvalOptions(precision="fp32"))
    with pytest.raises(EvalConfigError, match=r"^eval\.precision: bf16 is supported on CPU and CUDA, not on mps"):
        check_eval_config(data_dir, ["stsb"], eval_device="mps", options=EvalOptions(precision="bf16"))


@pytest.mark.usefixtures("gpu_machine_without_cpu_bf16")
def test_preflight_rejects_bf16_eval_on_a_cpu_without_bf16_units(tiny_bert: Path, data_dir: Path) -> None:
    def job(*overrides: str):  # noqa: ANN202
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("config", overrides=["mode=eval", f"model.name_or_path={tiny_bert}",
                                                f"paths.data_dir={data_dir}", "eval.tasks=[stsb]", *overrides])

    preflight(job("eval.precision=bf16"))  # train.device=auto: the GPU
    with pytest.raises(ConfigError, match=r"^eval\.precision: bf16 needs a CPU with avx512_bf16 or amx_bf16"):
        preflight(job("eval.precision=bf16", "train.device=cpu"))


def test_bf16_on_cuda_without_a_gpu_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(inference.InferenceConfigError, match=r"^eval\.precision: bf16 on cuda, but torch sees no CUDA"):
        inference.check_inference_options("torch", "bf16", "cuda")
