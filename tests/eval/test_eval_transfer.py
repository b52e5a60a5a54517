"""SentEval transfer tasks: readers (latin-1, NEL, BOM), SentEval's sort order, folds and penalty
grid, the C <-> L2 mapping, determinism, and evaluate(tasks=[transfer]) on a small fixture."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import NEGATIVE, POSITIVE, TREC_CUES, write_transfer_fixture
from sklearn.model_selection import StratifiedKFold

import cl_bench.eval.senteval_classifier as senteval_classifier
import cl_bench.eval.transfer as transfer
from cl_bench.data.senteval import (
    read_binary_task,
    read_latin1_samples,
    read_mrpc_file,
    read_sst_split,
    read_trec_file,
)
from cl_bench.eval import EvalOptions, evaluate, evaluate_dev
from cl_bench.eval.options import EvalConfigError
from cl_bench.eval.postprocess import PostProcess
from cl_bench.eval.tasks import check_eval_config
from cl_bench.eval.transfer import (
    L2_GRID,
    fit_logistic_regression,
    inner_kfold_probe,
    kfold_probe,
    penalty_to_c,
    run_transfer_task,
    sentevals_order,
    split_probe,
    stratified_folds,
)


class CueEncoder:
    """Sum of word vectors: small noise for every word, a strong signal on one axis per cue group
    (axis 0 positive, axis 1 negative, axes 2-7 the TREC classes), so the probes have something to learn."""

    def __init__(self, width: int = 8) -> None:
        self.width = width
        self.calls = 0
        self.axis = {word: 0 for word in POSITIVE} | {word: 1 for word in NEGATIVE}
        self.axis |= {word: 2 + i for i, word in enumerate(TREC_CUES)}

    def vector(self, word: str) -> np.ndarray:
        vector = np.random.default_rng(zlib.crc32(word.encode())).normal(scale=0.3, size=self.width)
        if word in self.axis:
            vector[self.axis[word]] += 3.0
        return vector

    def encode(self, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
        self.calls += 1
        rows = [sum((self.vector(w) for w in s.split()), np.zeros(self.width)) for s in sentences]
        return np.asarray(rows, dtype=np.float32).reshape(len(sentences), self.width)


@pytest.fixture(scope="module")
def transfer_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_transfer_fixture(tmp_path_factory.mktemp("senteval_transfer"))


def separable(n: int = 120, width: int = 8, classes: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Well-separated Gaussian classes (with overlap, so that the optimum weights stay finite)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    centers = rng.normal(scale=1.5, size=(classes, width))
    return centers[y] + rng.normal(size=(n, width)), y


# ------------------------------------------------------------------------------------------------
# Readers and order
# ------------------------------------------------------------------------------------------------
def test_latin1_reader_splits_at_nel_like_senteval(tmp_path: Path) -> None:
    path = tmp_path / "rt-polarity.pos"
    path.write_bytes(b"a clich\xe9d  film\x85 but fun\nsecond line\n")
    # str.splitlines() on latin-1 text also breaks at U+0085, as in SentEval's loadFile
    assert read_latin1_samples(path) == ["a clich\u00e9d film", "but fun", "second line"]
    data = read_binary_task(path, path)
    assert data.labels.tolist() == [1, 1, 1, 0, 0, 0]


def test_trec_mrpc_sst_readers(transfer_root: Path, tmp_path: Path) -> None:
    trec = read_trec_file(transfer_root / "transfer/TREC/TREC_10.label")
    assert len(trec) == 24 and sorted(set(trec.labels.tolist())) == [0, 1, 2, 3, 4, 5]
    mrpc = read_mrpc_file(transfer_root / "transfer/MRPC/msr_paraphrase_train.txt")  # BOM header skipped
    assert len(mrpc) == 40 and mrpc.labels.sum() == 20
    sst = read_sst_split(transfer_root / "transfer/SST/binary/sentiment-dev")
    assert len(sst) == 60 and not any(text.endswith(" ") for text in sst.texts)
    bad = tmp_path / "bad.label"
    bad.write_text("NUM:date When ?\nFOO:bar What ?\n")
    with pytest.raises(ValueError, match=r"bad\.label:2: unknown TREC class 'FOO'"):
        read_trec_file(bad)


def test_senteval_sort_order_is_stable_by_words_then_label() -> None:
    texts = ("b c d", "x", "a b", "c d", "y", "e f g")
    labels = np.array([1, 1, 1, 0, 0, 0])
    ordered = sentevals_order(texts, labels)
    # (1 word, label 0) < (1 word, label 1) < (2 words, 0) < (2 words, 1) < (3 words, 0) < (3 words, 1)
    assert ordered.texts == ("y", "x", "c d", "a b", "e f g", "b c d")
    assert ordered.labels.tolist() == [0, 1, 0, 1, 0, 1]


# ------------------------------------------------------------------------------------------------
# Protocol: grid, folds, penalty mapping, determinism
# ------------------------------------------------------------------------------------------------
def test_penalty_grid_and_folds_follow_senteval(monkeypatch: pytest.MonkeyPatch) -> None:
    assert L2_GRID == tuple(10.0**t for t in range(-5, -1))  # SentEval's usepytorch grid
    x, y = separable(200)
    expected = list(StratifiedKFold(n_splits=10, shuffle=True, random_state=1111).split(x, y))
    for (train_a, test_a), (train_b, test_b) in zip(stratified_folds(y, 10, 1111), expected, strict=True):
        assert np.array_equal(train_a, train_b) and np.array_equal(test_a, test_b)

    calls: list[tuple[int, int, int]] = []
    original = transfer.stratified_folds

    def spy(labels: np.ndarray, kfold: int, seed: int) -> list:
        calls.append((len(labels), kfold, seed))
        return original(labels, kfold, seed)

    monkeypatch.setattr(transfer, "stratified_folds", spy)
    result = inner_kfold_probe(x[:150], y[:150], kfold=3, seed=1111)
    # outer k folds on all samples, then k inner folds on each outer training part, same seed
    assert calls == [(150, 3, 1111)] + [(100, 3, 1111)] * 3
    assert len(result.penalties) == 3 and set(result.penalties) <= set(L2_GRID)
    calls.clear()
    kfold_probe(x[:150], y[:150], x[150:], y[150:], kfold=5, seed=7)
    assert calls == [(150, 5, 7)]


@pytest.mark.parametrize("classes", [2, 3])
def test_penalty_mapping_solves_sentevals_objective(classes: int) -> None:
    # SentEval: mean softmax cross-entropy + (l2/2) * ||W||^2 over a (classes x D) layer.
    # At scikit-learn's solution with C = penalty_to_c(l2, n, classes), that objective's weight
    # gradient must vanish (intercepts taken from scikit-learn, which leaves them unpenalised).
    x, y = separable(300, width=5, classes=classes, seed=3)
    x = x / 4
    l2 = 1e-2
    model = fit_logistic_regression(x, y, l2)
    coef, intercept = model.coef_, model.intercept_
    if classes == 2:  # one logit w = W_1 - W_0, with W_1 = -W_0 = w/2 at SentEval's optimum
        coef, intercept = np.vstack([-coef / 2, coef / 2]), np.array([-intercept[0] / 2, intercept[0] / 2])
    weight = torch.tensor(coef, requires_grad=True)
    logits = torch.tensor(x) @ weight.T + torch.tensor(intercept)
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(y)) + l2 / 2 * weight.pow(2).sum()
    loss.backward()
    assert weight.grad.abs().max().item() < 1e-5 * max(1.0, l2 * np.abs(coef).max())
    assert penalty_to_c(l2, 300, classes) == pytest.approx((2.0 if classes == 2 else 1.0) / (l2 * 300))


def test_same_seed_same_accuracy_other_seed_other_folds() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(150, 6)), np.arange(150) % 2  # noise: accuracy depends on the folds
    first, again = inner_kfold_probe(x, y, 3, seed=1111), inner_kfold_probe(x, y, 3, seed=1111)
    assert first == again
    other = [test for _, test in stratified_folds(y, 3, 1234)]
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(other, (t for _, t in stratified_folds(y, 3, 1111)), strict=True)
    )


def test_probes_learn_separable_data() -> None:
    x, y = separable(120)
    assert inner_kfold_probe(x, y, 3).acc > 90
    x3, y3 = separable(180, classes=3, seed=1)
    result = kfold_probe(x3[:120], y3[:120], x3[120:], y3[120:], 3)
    assert result.acc > 85 and result.predictions.shape == (60,)
    split = split_probe(x[:60], y[:60], x[60:90], y[60:90], x[90:], y[90:])
    assert split.devacc > 90 and split.acc > 90


# ------------------------------------------------------------------------------------------------
# evaluate on the fixture
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def one_penalty(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wiring tests: one penalty instead of four (4x fewer fits); the grid itself is tested above."""
    monkeypatch.setattr(transfer, "L2_GRID", (1e-3,))
    monkeypatch.setattr(senteval_classifier, "L2_GRID", (1e-3,))


def test_evaluate_transfer_configs(
    transfer_root: Path, one_penalty: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    folds_seen: list[int] = []
    original = senteval_classifier.stratified_folds
    monkeypatch.setattr(
        senteval_classifier,
        "stratified_folds",
        lambda y, k, seed: folds_seen.append(k) or original(y, k, seed),
    )
    encoder = CueEncoder()
    results = evaluate(encoder, transfer_root, tasks=["transfer"],
                       options=EvalOptions(align_uniform=False, anisotropy=False, transfer_config="fast"))
    assert encoder.calls == 1 and set(folds_seen) == {5}
    tasks = ("mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc")
    assert {
        *tasks,
        *(f"{t}_dev" for t in tasks),
        "mrpc_f1",
        "transfer_avg",
        "transfer_dev_avg",
    } <= results.keys()
    assert results["transfer_avg"] == pytest.approx(np.mean([results[t] for t in tasks]))
    assert results["transfer_dev_avg"] == pytest.approx(np.mean([results[f"{t}_dev"] for t in tasks]))
    assert (
        min(results[t] for t in ("mr", "cr", "subj", "mpqa", "sst2")) > 65
    )  # 7 in 8 carry their cue word (chance: 50); SentEval's early-stopped Adam/RMSprop learns less than lbfgs
    assert results["trec"] > 75 and results["mrpc"] > 60 and 0 <= results["mrpc_f1"] <= 100
    folds_seen.clear()
    full = evaluate(encoder, transfer_root, tasks=["trec"],
                    options=EvalOptions(align_uniform=False, anisotropy=False))
    assert set(folds_seen) == {10} and set(full) == {"trec", "trec_dev"}


def test_transfer_whitening_and_dev_selection(transfer_root: Path, one_penalty: None) -> None:
    parts = transfer.load_transfer_task(transfer_root, "cr")
    encoder = CueEncoder()
    raw = run_transfer_task("cr", parts, encoder.encode, config="fast")
    white = run_transfer_task("cr", parts, encoder.encode, config="fast", postprocess=PostProcess("whitening", 4))
    assert set(white) == {"cr", "cr_dev"} and white != raw
    dev = evaluate_dev(encoder, transfer_root, select_metric="transfer_dev_avg")
    tasks = ("mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc")
    assert dev["transfer_dev_avg"] == pytest.approx(np.mean([dev[f"{t}_dev"] for t in tasks]))
    assert "stsb_dev" in dev and "mr" not in dev  # dev evaluation reports no test figures


def test_sklearn_classifier_is_selectable_and_bad_names_are_rejected(transfer_root: Path, one_penalty: None) -> None:
    parts = transfer.load_transfer_task(transfer_root, "trec")
    encoder = CueEncoder()
    senteval = run_transfer_task("trec", parts, encoder.encode, config="fast")
    sklearn = run_transfer_task("trec", parts, encoder.encode, config="fast", classifier="sklearn")
    assert set(sklearn) == set(senteval) == {"trec", "trec_dev"} and sklearn != senteval
    with pytest.raises(EvalConfigError, match="^eval.transfer_classifier: must be one of senteval, sklearn, got 'torch'$"):
        check_eval_config(transfer_root, ["trec"], options=EvalOptions(transfer_classifier="torch"))
