"""train.early_stopping_rule (no_gain | SG-BERT's drops) and train.final_weights (best | last)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import early_stopping_config as _config
from conftest import scripted_dev as _scripted_dev

from cl_bench.config import ConfigError, typed_specs, validate
from cl_bench.train.loop import train
from cl_bench.train.selection import early_stopping_count

SCORES = [50.0, 60.0, 55.0, 58.0, 57.0, 70.0, 65.0, 66.0]


def _counts(rule: str, scores: list[float]) -> list[int]:
    count, previous, best, counts = 0, 0.0, float("-inf"), []
    for score in scores:
        count = early_stopping_count(rule, count, score, previous, score > best)
        previous, best = score, max(best, score)
        counts.append(count)
    return counts


def test_the_two_rules_by_hand() -> None:
    # no_gain: 55, 58, 57 bring no new best (1, 2, 3); 70 resets; 65, 66 -> 1, 2
    assert _counts("no_gain", SCORES) == [0, 0, 1, 2, 3, 0, 1, 2]
    # drops (SG-BERT): only falls below the previous score count, never reset: 55, 57, 65
    assert _counts("drops", SCORES) == [0, 0, 1, 1, 2, 2, 3, 3]
    # the first evaluation is compared with 0, as SG-BERT's last_score = 0
    assert _counts("drops", [-3.0]) == [1]


def test_drops_rule_stops_where_sg_bert_does(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """patience 3: no_gain stops at the 5th evaluation (57), drops at the 7th (65)."""
    stops = {}
    for rule in ("no_gain", "drops"):
        cfg = _config(tiny_bert, data_dir, "train.early_stopping_patience=3", f"train.early_stopping_rule={rule}")
        (tmp_path / rule).mkdir()
        _, state = train(typed_specs(cfg), tmp_path / rule, lambda metrics, step: None, _scripted_dev(SCORES))
        stops[rule] = (state.step, state.stopped_early)
    assert stops == {"no_gain": (5, True), "drops": (7, True)}


def test_final_weights_last_keeps_the_trained_weights(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """Best dev at step 1 of 4: `best` reloads step 1's weights, `last` keeps step 4's."""
    (tmp_path / "one").mkdir()
    one_step, _ = train(typed_specs(_config(tiny_bert, data_dir, "train.max_steps=1")), tmp_path / "one",
                        lambda metrics, step: None, _scripted_dev([9.0]))
    step_one = {k: v.clone() for k, v in one_step.state_dict().items()}  # the same seed: step 1's weights
    for choice in ("best", "last"):
        cfg = _config(tiny_bert, data_dir, "train.max_steps=4", f"train.final_weights={choice}")
        (tmp_path / choice).mkdir()
        method, state = train(typed_specs(cfg), tmp_path / choice, lambda metrics, step: None, _scripted_dev([9.0, 1.0, 1.0, 1.0]))
        assert state.best_step == 1
        final = method.state_dict()
        same = all(torch.equal(final[k], step_one[k]) for k in step_one)
        assert same == (choice == "best")


def test_bad_values_name_the_key(tiny_bert: Path, data_dir: Path) -> None:
    with pytest.raises(Exception, match="train.early_stopping_rule=sometimes") as err:  # a StrEnum: no other value composes
        _config(tiny_bert, data_dir, "train.early_stopping_rule=sometimes", "train.early_stopping_patience=2")
    assert "expected one of [no_gain, drops]" in str(err.value.__cause__)
    with pytest.raises(ConfigError, match="train.early_stopping_rule: 'drops' needs train.early_stopping_patience > 0"):
        validate(_config(tiny_bert, data_dir, "train.early_stopping_rule=drops"))
    with pytest.raises(Exception, match="train.final_weights=median") as err:
        _config(tiny_bert, data_dir, "train.final_weights=median")
    assert "expected one of [best, last]" in str(err.value.__cause__)
