"""The DataLoader: workers prepare batches; the same seed gives the same batches with 0 and 2 workers."""

from __future__ import annotations

import functools
import os
import random
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import typed_specs, validate
from cl_bench.data.loader import BatchLoader
from cl_bench.methods.base import Method
from cl_bench.train.loop import Trainer

ITEMS = [f"sentence number {i} about a dog and a cat" for i in range(23)]


def _prepare(items: list[str], rng: random.Random) -> tuple[list[str], float]:
    """An augmentation drawing from the batch's RNG and from torch's global RNG."""
    return [" ".join(rng.sample(s.split(), 3)) for s in items], float(torch.rand(()))


def _sequence(num_workers: int, epochs: tuple[tuple[int, int], ...]) -> list:
    loader = BatchLoader(ITEMS, functools.partial(Method.batches, None), _prepare, 4, seed=7, num_workers=num_workers)
    return [batch for epoch, start in epochs for batch in loader.epoch(epoch, start)]


def test_same_seed_same_batches_with_0_and_2_workers_and_from_a_resume_position() -> None:
    state = torch.get_rng_state()
    serial = _sequence(0, ((0, 0), (1, 0)))
    assert torch.equal(torch.get_rng_state(), state)  # preparing in the main process leaves its RNG alone
    assert len(serial) == 12 and serial[0] != serial[6]  # 6 batches per epoch (23 items, batch 4), epochs differ
    assert _sequence(2, ((0, 0), (1, 0))) == serial
    assert _sequence(2, ((0, 4), (1, 0))) == serial[4:]  # a resume at batch 4 of epoch 0


def _config(tiny_bert: Path, data_dir: Path, *extra: str):  # noqa: ANN202
    os.environ["CL_BENCH_DATA"] = str(data_dir)
    overrides = [
        f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=40", "batch_size=8", "pooler=avg",
        "augmentation=word_deletion", "train.max_steps=4", "train.eval_steps=0", "train.save_best=false",
        "train.device=cpu", "train.progress_bar=false", "train.checkpoint_steps=0", *extra,
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    validate(cfg)
    return cfg


def test_training_with_workers_equals_training_without(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    weights, losses = [], []
    for workers in (0, 2):
        logged: list[float] = []
        trainer = Trainer(
            typed_specs(_config(tiny_bert, data_dir, f"train.num_workers={workers}", "train.log_steps=1")),
            tmp_path,
            lambda metrics, step, logged=logged: logged.append(metrics["train/loss"]) if "train/loss" in metrics else None,
            lambda encoder: {"stsb_dev": 0.0},
        )
        method, state = trainer.fit()
        assert state.step == 4
        weights.append({k: v.clone() for k, v in method.state_dict().items()})
        losses.append(logged)
    assert losses[0] == losses[1] and len(losses[0]) == 4
    assert all(torch.equal(weights[1][k], v) for k, v in weights[0].items())
