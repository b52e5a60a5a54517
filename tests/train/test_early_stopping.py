"""Early stopping on the dev metric (SG-BERT's --es): stop after N evaluations without a new best."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import early_stopping_config, scripted_dev

from cl_bench.config import ConfigError, typed_specs, validate
from cl_bench.train.loop import train


def test_stops_after_patience_evaluations_without_gain(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    cfg = early_stopping_config(tiny_bert, data_dir, "train.early_stopping_patience=2")
    # best at step 2; steps 3 and 4 bring no gain (a tie is no gain) -> stop after step 4
    _, state = train(typed_specs(cfg), tmp_path, lambda metrics, step: None, scripted_dev([1.0, 2.0, 2.0, 1.5, 9.0]))
    assert (state.step, state.stopped_early, state.best_step, state.best_score) == (4, True, 2, 2.0)


def test_a_new_best_resets_the_count(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    cfg = early_stopping_config(tiny_bert, data_dir, "train.early_stopping_patience=2")
    scores = [1.0, 0.5, 2.0, 1.0, 3.0, 2.0, 4.0, 1.0, 5.0, 1.0]  # never two evaluations in a row without gain
    _, state = train(typed_specs(cfg), tmp_path, lambda metrics, step: None, scripted_dev(scores))
    assert (state.step, state.stopped_early, state.best_step) == (10, False, 9)


def test_off_by_default(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    cfg = early_stopping_config(tiny_bert, data_dir)
    assert cfg.train.early_stopping_patience == 0
    _, state = train(typed_specs(cfg), tmp_path, lambda metrics, step: None, scripted_dev([5.0, 1.0]))
    assert (state.step, state.stopped_early, state.best_step) == (10, False, 1)


def test_best_weights_come_back_without_files_when_save_best_is_off(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    cfg = early_stopping_config(tiny_bert, data_dir, "train.max_steps=3")  # early_stopping_config: train.save_best=false, no checkpoints
    seen: list[dict] = []
    scripted = scripted_dev([5.0, 1.0, 2.0])  # best at step 1

    def dev_eval(encoder: torch.nn.Module) -> dict[str, float]:
        seen.append({k: v.clone() for k, v in encoder.state_dict().items()})
        return scripted(encoder)

    method, state = train(typed_specs(cfg), tmp_path, lambda metrics, step: None, dev_eval)
    assert state.best_step == 1
    returned = method.eval_encoder().state_dict()
    assert all(torch.equal(returned[k], v) for k, v in seen[0].items())  # the step-1 weights, from memory
    assert not all(torch.equal(seen[2][k], v) for k, v in seen[0].items())  # (training did move them)
    assert list(tmp_path.iterdir()) == []  # and nothing was written to the run directory


def test_a_negative_patience_names_the_key(tiny_bert: Path, data_dir: Path) -> None:
    with pytest.raises(ConfigError, match="train.early_stopping_patience: must be >= 0"):
        validate(early_stopping_config(tiny_bert, data_dir, "train.early_stopping_patience=-1"))


def test_without_dev_evaluations_patience_is_inert(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    # e.g. a short run of the SG-OPT preset with train.eval_steps=0: only the final evaluation, no stop
    cfg = early_stopping_config(tiny_bert, data_dir, "train.early_stopping_patience=1", "train.eval_steps=0")
    validate(cfg)
    _, state = train(typed_specs(cfg), tmp_path, lambda metrics, step: None, scripted_dev([1.0]))
    assert (state.step, state.stopped_early) == (10, False)


def test_sg_opt_preset_uses_the_official_patience(tiny_bert: Path, data_dir: Path) -> None:
    cfg = early_stopping_config(tiny_bert, data_dir, "experiment=sg_opt_bert")
    assert (cfg.train.early_stopping_patience, cfg.seed) == (10, 1)  # eval_steps=1 here is early_stopping_config's override
