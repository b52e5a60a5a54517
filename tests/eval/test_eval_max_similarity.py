"""train.select_metric=stsb_dev_max_similarity: IS-BERT's and BSL's checkpoint selection (best of four Spearmans);
stsb_dev_max_similarity_no_dot: sentence-transformers v0.2.0's (Sentence-BERT; best of three, no dot product)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import HashEncoder, write_sts_fixture

from cl_bench.data.senteval import ScoredPairs
from cl_bench.eval import check_eval_config, evaluate_dev
from cl_bench.eval.sts import similarity_spearmans, spearman100


def test_the_best_of_four_similarities_is_selected() -> None:
    """Gold follows the vectors' length ratio: the dot product ranks it, cosine barely does."""
    rng = np.random.default_rng(0)
    count = 40
    base = rng.normal(size=(count, 8))
    scale = np.linspace(2.0, 10.0, count)
    second = (base + 0.5 * rng.normal(size=(count, 8))) * scale[:, None]  # direction independent of gold
    table = {f"a{i}": base[i] for i in range(count)} | {f"b{i}": second[i] for i in range(count)}
    pairs = ScoredPairs(tuple(f"a{i}" for i in range(count)), tuple(f"b{i}" for i in range(count)), scale)
    scores = similarity_spearmans("stsb_dev", pairs, lambda sentences: np.stack([table[s] for s in sentences]))

    assert set(scores) == {f"stsb_dev_{n}" for n in ("cosine", "manhattan", "euclidean", "dot", "max_similarity",
                                                     "max_similarity_no_dot")}
    dot = spearman100((base * second).sum(axis=1), scale)
    manhattan = spearman100(-np.abs(base - second).sum(axis=1), scale)
    assert scores["stsb_dev_dot"] == pytest.approx(dot)
    assert scores["stsb_dev_manhattan"] == pytest.approx(manhattan)
    assert scores["stsb_dev_max_similarity"] == max(
        scores[f"stsb_dev_{n}"] for n in ("cosine", "manhattan", "euclidean", "dot")
    )
    assert scores["stsb_dev_max_similarity"] > scores["stsb_dev_cosine"] + 10
    # v0.2.0's evaluator has no dot product: here the dot product was the best, so the maxima differ
    assert scores["stsb_dev_max_similarity_no_dot"] == max(
        scores[f"stsb_dev_{n}"] for n in ("cosine", "manhattan", "euclidean")
    )
    assert scores["stsb_dev_max_similarity"] == scores["stsb_dev_dot"] > scores["stsb_dev_max_similarity_no_dot"]


def test_the_best_of_three_takes_the_manhattan_when_gold_follows_it() -> None:
    """v0.2.0's three similarities: gold is the negative Manhattan distance, so its Spearman (100) is the best."""
    rng = np.random.default_rng(1)
    count = 30
    first = rng.normal(size=(count, 4))
    offset = rng.normal(size=(count, 4)) * np.linspace(0.1, 3.0, count)[:, None]
    gold = -np.abs(offset).sum(axis=1)  # gold follows the Manhattan distance exactly
    table = {f"a{i}": first[i] for i in range(count)} | {f"b{i}": first[i] + offset[i] for i in range(count)}
    pairs = ScoredPairs(tuple(f"a{i}" for i in range(count)), tuple(f"b{i}" for i in range(count)), gold)
    scores = similarity_spearmans("stsb_dev", pairs, lambda sentences: np.stack([table[s] for s in sentences]))
    assert scores["stsb_dev_manhattan"] == pytest.approx(100.0)
    assert scores["stsb_dev_max_similarity_no_dot"] == pytest.approx(100.0)


def test_evaluate_dev_reports_the_metric(tmp_path: Path) -> None:
    root = write_sts_fixture(tmp_path / "data", seed=5)
    check_eval_config(root, ["stsb"], select_metric="stsb_dev_max_similarity")
    dev = evaluate_dev(HashEncoder(), root, "stsb_dev_max_similarity")
    assert dev["stsb_dev_cosine"] == pytest.approx(dev["stsb_dev"], abs=1e-6)
    assert dev["stsb_dev_max_similarity"] >= dev["stsb_dev"]
    assert "stsb_dev_max_similarity" not in evaluate_dev(HashEncoder(), root, "stsb_dev")
    check_eval_config(root, ["stsb"], select_metric="stsb_dev_max_similarity_no_dot")
    three = evaluate_dev(HashEncoder(), root, "stsb_dev_max_similarity_no_dot")
    assert three["stsb_dev_max_similarity_no_dot"] == max(
        three[f"stsb_dev_{n}"] for n in ("cosine", "manhattan", "euclidean")
    )
    assert three["stsb_dev_max_similarity_no_dot"] >= three["stsb_dev"]
