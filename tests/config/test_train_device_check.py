"""``train.device`` and ``train.precision`` are checked before training starts: a GPU command run on a machine
without the GPU (``train.device=cuda``, ``cuda:3`` on a one-GPU machine, ``mps``), a device string torch does not
know, or ``train.precision=fp16`` off CUDA used to fail with torch's traceback after the model had loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import ConfigError, check_choices, check_device, validate


def _config(tiny_bert: Path, data_dir: Path, *overrides: str):  # noqa: ANN202
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"model.name_or_path={tiny_bert}", f"paths.data_dir={data_dir}",
                                            "data=wiki1m_head", *overrides])


def _rejection(cfg) -> str | None:  # noqa: ANN001
    try:
        check_device(cfg)
    except ConfigError as err:
        return str(err)
    return None


def test_a_cuda_device_the_machine_lacks_is_one_line(tiny_bert: Path, data_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _rejection(_config(tiny_bert, data_dir, "train.device=cuda")) in (
        "train.device: cuda, but torch is built without CUDA; use train.device=auto (or cpu)",
        "train.device: cuda, but torch sees no CUDA device; use train.device=auto (or cpu)")
    with pytest.raises(ConfigError, match=r"^train\.device: cuda, but torch"):  # the job's validation: its last check
        validate(_config(tiny_bert, data_dir, "train.device=cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a one-GPU machine
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)  # precision=auto asks
    assert _rejection(_config(tiny_bert, data_dir, "train.device=cuda:0")) is None
    assert _rejection(_config(tiny_bert, data_dir, "train.device=cuda:3")) == \
        "train.device: cuda:3, but torch sees 1 CUDA device(s): cuda:0 to cuda:0"
    assert _rejection(_config(tiny_bert, data_dir, "train.device=cuda", "train.precision=fp16")) is None


def test_mps_and_unknown_devices_and_fp16_off_cuda_are_one_line(tiny_bert: Path, data_dir: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    if getattr(torch.backends, "mps", None) is not None:
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert _rejection(_config(tiny_bert, data_dir, "train.device=mps")) == \
        "train.device: mps, but torch sees no MPS device; use train.device=auto (or cpu)"
    assert _rejection(_config(tiny_bert, data_dir, "train.device=foo:1")) == \
        "train.device: 'foo:1' is not a device; e.g. auto, cpu, cuda, cuda:1, mps"
    # auto on a CPU machine: fp16 has no loss scaling there
    assert _rejection(_config(tiny_bert, data_dir, "train.precision=fp16")) == \
        "train.precision: fp16 needs a CUDA device, got cpu; use bf16 or fp32 (train.device=auto)"
    assert _rejection(_config(tiny_bert, data_dir, "train.precision=bf16", "train.device=cpu")) is None
    assert _rejection(_config(tiny_bert, data_dir, "mode=eval", "train.precision=fp16")) is None  # nothing trains
    # what the config alone decides is answered with the values (before torch, cl-bench's early checks)
    for overrides, message in ((["train.device=cpu:0x"], "train.device: must name a device, e.g. auto, cpu, "
                                                         "cuda, cuda:1, mps, got 'cpu:0x'"),
                               (["train.precision=fp16", "train.device=cpu"],
                                "train.precision: fp16 needs a CUDA device (loss scaling), got train.device=cpu; "
                                "use bf16 or fp32")):
        with pytest.raises(ConfigError) as err:
            check_choices(_config(tiny_bert, data_dir, *overrides), before_torch=True)
        assert str(err.value) == message
