"""The quick evaluation for iterating (issue 38 item 2): ``eval=iterate`` scores STS-B on a fixed sample of pairs,
says so (log line, ``eval_sample_pairs`` in the results), and ``eval.sample_pairs=null`` keeps the full protocol."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR
from cl_bench.config import typed_specs
from cl_bench.data.senteval import ScoredPairs
from cl_bench.eval import EvalConfigError, EvalOptions, check_eval_config, evaluate
from cl_bench.eval.suite import sampled_pairs


def test_sample_is_fixed_ordered_and_only_cuts_sts_splits() -> None:
    pairs = ScoredPairs(tuple(f"a{i}" for i in range(40)), tuple(f"b{i}" for i in range(40)), np.arange(40.0))
    first, second = sampled_pairs({"test": pairs, "other": "kept"}, 10), sampled_pairs({"test": pairs}, 10)
    assert first["other"] == "kept" and len(first["test"]) == 10
    assert first["test"].sent1 == second["test"].sent1 and list(first["test"].gold) == sorted(first["test"].gold)
    assert [f"a{int(g)}" for g in first["test"].gold] == list(first["test"].sent1)  # rows stay aligned
    assert sampled_pairs({"test": pairs}, 100)["test"] is pairs


def test_sample_pairs_is_checked(data_dir: Path) -> None:
    for bad in (5, True, "300"):
        with pytest.raises(EvalConfigError, match=r"^eval\.sample_pairs: must be >= 10, got"):
            check_eval_config(data_dir, ["stsb"], EvalOptions(sample_pairs=bad), files=False)
    check_eval_config(data_dir, ["stsb"], EvalOptions(sample_pairs=300), files=False)


def test_iterate_preset_is_quick_on_a_sample() -> None:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        iterate = compose("config", overrides=["eval=iterate"])
        default = compose("config")
    assert list(iterate.eval.tasks) == ["stsb"] and iterate.eval.sample_pairs == 300
    assert iterate.eval.align_uniform_split == "test" and default.eval.sample_pairs is None


class CountingEncoder:
    """A bag-of-characters encoder that records how many sentences it was asked to encode."""

    def __init__(self) -> None:
        self.encoded = 0

    def encode(self, sentences: Sequence[str], batch_size: int) -> np.ndarray:
        self.encoded += len(sentences)
        return np.array([[text.count(c) for c in "aeiostn "] for text in sentences], dtype=np.float32) + 1e-3


def test_sampled_evaluation_encodes_a_fraction_and_says_so(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    options = EvalOptions(align_uniform_split="test", cache=False)
    full, quick = CountingEncoder(), CountingEncoder()
    reference = evaluate(full, data_dir, ["stsb"], options)
    with caplog.at_level(logging.INFO, logger="cl_bench.eval.suite"):
        sampled = evaluate(quick, data_dir, ["stsb"], dataclasses.replace(options, sample_pairs=300))
    assert "eval_sample_pairs" not in reference and sampled["eval_sample_pairs"] == 300
    assert "the QUICK protocol for iterating" in caplog.text
    assert quick.encoded <= 0.25 * full.encoded and quick.encoded <= 2 * 2 * 300
    assert np.isfinite(sampled["stsb"]) and "align" in " ".join(sampled)


class _StopAfterDevEval(Exception):
    """Ends the faked training once its dev evaluation ran (the final evaluation is not under test)."""


@pytest.mark.parametrize("preset", ["iterate", "quick"])
def test_iterate_runs_no_full_dev_set_encoding_in_training(
        preset: str, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The in-training dev evaluation the job builds (job's dev_eval) encodes the final evaluation's fixed sample with
    eval=iterate (at most 2 sentences x 300 pairs x 2 dev sets), every dev pair with eval=quick."""
    from cl_bench.commands import job
    from cl_bench.eval import suite

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"eval={preset}", f"paths.data_dir={data_dir}"])
    counting = CountingEncoder()
    scores: list[dict[str, float]] = []

    def fake_train(specs, run_dir, log_metrics, dev_eval, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        scores.append(dev_eval(counting))
        raise _StopAfterDevEval

    monkeypatch.setattr(job, "train", fake_train)
    monkeypatch.setattr(suite, "_DEV_SAMPLES_SAID", set())  # said once per process: as if this were the first job
    with caplog.at_level(logging.INFO, logger="cl_bench.eval.suite"), pytest.raises(_StopAfterDevEval):
        job._train_and_evaluate(cfg, typed_specs(cfg), tmp_path, tracker=SimpleNamespace(log_metrics=None), stop_requested=lambda: False,
                                resume=False)
    assert np.isfinite(scores[0]["stsb_dev"]) and "stsb_dev.sample300" not in scores[0]  # flat keys: D names them
    if preset == "iterate":
        assert counting.encoded <= 2 * 2 * 300
        assert "dev evaluation on the fixed sample of eval.sample_pairs=300" in caplog.text
    else:  # STS-B dev (1,500 pairs) and SICK-R dev (500 pairs): the full protocol, unchanged
        assert counting.encoded > 3000 and "fixed sample" not in caplog.text
