"""SentEval's transfer classifier: the batched trainer trains the models the one-at-a-time reference
trains, SentEval's RNG use (fresh seed per model, 5% hold-out, nn.Linear init), and the protocols."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

import cl_bench.eval.senteval_classifier as sc
from cl_bench.eval.senteval_classifier import (
    L2_GRID,
    SENTEVAL_CONFIGS,
    DataSplit,
    fit_grid,
    fit_grid_sequential,
    initial_linear,
    senteval_inner_kfold,
    senteval_kfold,
    senteval_split,
    stratified_folds,
)

#: SentEval's configurations with fewer epochs, so the one-at-a-time reference runs in seconds; the
#: ``stopping`` variant stops early (tenacity 1) so the stopping rule is exercised.
SHORT = {name: dataclasses.replace(config, max_epoch=8) for name, config in SENTEVAL_CONFIGS.items()}
SHORT["stopping"] = dataclasses.replace(SENTEVAL_CONFIGS["full"], max_epoch=16, tenacity=1, batch_size=32)


def noisy(n: int, classes: int = 2, width: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping Gaussian classes: accuracies neither 0 nor 1, so early stopping has work to do."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    x = rng.normal(size=(n, width)) + 2.0 * np.eye(classes, width)[y]
    return x.astype(np.float32), y


@pytest.mark.parametrize(("name", "classes"), [("full", 3), ("fast", 3), ("stopping", 3), ("stopping", 6)])
def test_batched_grid_trains_the_one_at_a_time_models(name: str, classes: int) -> None:
    """Also with 6 classes (TREC): 12 lanes, 2 blocks of 8; with early stopping, a block whose
    models have all stopped is skipped while the other trains on."""
    x, y = noisy(155, classes=classes)
    # folds of unequal sizes (last minibatches differ), a 5% hold-out split, per-split penalties
    splits = [DataSplit(train, test) for train, test in stratified_folds(y, 4, 1111)]
    splits.append(DataSplit(np.arange(len(y))))
    penalties = np.array([L2_GRID[:2], L2_GRID[2:], L2_GRID[1:3], L2_GRID[::3], L2_GRID[:2]])
    batched = fit_grid(x, y, splits, penalties, classes, SHORT[name])
    reference = fit_grid_sequential(x, y, splits, penalties, classes, SHORT[name])
    assert np.array_equal(batched.accuracy, reference.accuracy)
    np.testing.assert_allclose(batched.weight, reference.weight, atol=1e-5)
    np.testing.assert_allclose(batched.bias, reference.bias, atol=1e-5)
    initial = initial_linear(6, classes, 1111)[0].numpy()
    assert np.abs(batched.weight - initial).max(axis=(2, 3)).min() > 0  # every kept model was trained


def test_models_start_from_a_freshly_seeded_linear_layer() -> None:
    state = torch.random.get_rng_state()
    weight, bias = initial_linear(7, 3, 1111)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's RNG is left alone
    torch.manual_seed(1111)
    layer = nn.Linear(7, 3)
    assert torch.equal(weight, layer.weight) and torch.equal(bias, layer.bias)
    assert not torch.equal(weight, initial_linear(7, 3, 1112)[0])


def test_final_fit_holds_out_sentevals_five_percent() -> None:
    rows = np.arange(100, 300)
    train, valid, holdout = sc._resolve(DataSplit(rows), 1111)
    permutation = np.random.RandomState(1111).permutation(200)  # np.random.seed(1111) in MLP.__init__
    assert holdout and np.array_equal(valid, rows[permutation[:10]])
    assert np.array_equal(train, rows[permutation[10:]])
    # the epochs then draw from the same RandomState, after the hold-out permutation
    rng = np.random.RandomState(1111)
    rng.permutation(200)
    assert np.array_equal(sc._Permutations(1111).epoch(200, True, 190, 0), rng.permutation(190))
    plain = sc._Permutations(1111)
    fresh = np.random.RandomState(1111)
    assert np.array_equal(plain.epoch(200, False, 200, 0), fresh.permutation(200))
    assert np.array_equal(plain.epoch(200, False, 200, 1), fresh.permutation(200))


@pytest.mark.parametrize("name", ["full", "fast"])
def test_protocols_batched_equal_one_at_a_time_and_use_sentevals_folds(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The all-models program of a task (scan and every-penalty refits together) gives the figures of
    the one-at-a-time reference (scan, then the chosen penalties' refits)."""
    calls: list[tuple[int, int, int]] = []
    original = sc.stratified_folds

    def spy(labels: np.ndarray, kfold: int, seed: int) -> list:
        calls.append((len(labels), kfold, seed))
        return original(labels, kfold, seed)

    monkeypatch.setattr(sc, "stratified_folds", spy)
    config = dataclasses.replace(SHORT[name], kfold=3)
    x, y = noisy(90)
    inner = senteval_inner_kfold(x, y, 2, config, seed=7)
    # InnerKFoldClassifier: outer and inner folds with random_state=1111 whatever the seed
    assert calls == [(90, 3, 1111)] + [(60, 3, 1111)] * 3
    assert inner == senteval_inner_kfold(x, y, 2, config, seed=7, batched=False)
    assert len(inner.penalties) == 3 and inner.acc > 60
    calls.clear()
    x3, y3 = noisy(150, classes=3, seed=1)
    kfold = senteval_kfold(x3[:120], y3[:120], x3[120:], y3[120:], 3, config, seed=7)
    assert calls == [(120, 3, 7)]  # KFoldClassifier: random_state=seed
    reference = senteval_kfold(x3[:120], y3[:120], x3[120:], y3[120:], 3, config, seed=7, batched=False)
    assert kfold.acc == reference.acc and kfold.devacc == reference.devacc
    assert np.array_equal(kfold.predictions, reference.predictions) and kfold.predictions.shape == (30,)
    split = senteval_split(x[:50], y[:50], x[50:70], y[50:70], x[70:], y[70:], 2, config)
    assert split.devacc > 60 and (split.acc > 60 or name == "full")  # full: 20 test rows after 8 epochs
    alone = senteval_split(x[:50], y[:50], x[50:70], y[50:70], x[70:], y[70:], 2, config, batched=False)
    assert (split.devacc, split.acc, split.penalties) == (alone.devacc, alone.acc, alone.penalties)
    assert np.array_equal(split.predictions, alone.predictions)


def test_all_models_program_trains_each_model_as_if_alone() -> None:
    """A model's result does not depend on the other models of the program: fitting a split alone
    or beside splits of other sizes (which stop at other times) gives the same model."""
    x, y = noisy(155, classes=3)
    folds = [DataSplit(train, test) for train, test in stratified_folds(y, 4, 1111)]
    together = fit_grid(x, y, [*folds, DataSplit(np.arange(40))], L2_GRID, 3, SHORT["stopping"])
    alone = fit_grid(x, y, [folds[2]], L2_GRID, 3, SHORT["stopping"])
    assert np.array_equal(together.accuracy[2], alone.accuracy[0])
    np.testing.assert_allclose(together.weight[2], alone.weight[0], atol=1e-6)


def test_all_models_program_gives_the_same_models_on_any_number_of_threads() -> None:
    """Splits train on their own threads: the result is bitwise the same on 1 or 2 threads, and the
    caller's torch thread setting is left as it was (numba's OpenMP layer shares torch's runtime)."""
    x, y = noisy(155, classes=3)
    splits = [DataSplit(train, test) for train, test in stratified_folds(y, 4, 1111)] + [DataSplit(np.arange(155))]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = fit_grid(x, y, splits, L2_GRID, 3, SHORT["stopping"])
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        two = fit_grid(x, y, splits, L2_GRID, 3, SHORT["stopping"])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert np.array_equal(one.accuracy, two.accuracy)
    assert np.array_equal(one.weight, two.weight) and np.array_equal(one.bias, two.bias)


@pytest.mark.parametrize(("name", "classes"), [("full", 3), ("fast", 3), ("stopping", 3), ("stopping", 6)])
def test_torch_trainer_run_on_cpu_trains_the_one_at_a_time_models(name: str, classes: int) -> None:
    """The GPU path (``fit_grid_torch``, SentEval's ``usepytorch`` on the encoder's device) run on the CPU:
    the accuracies of the one-at-a-time reference, its weights up to float32 rounding (issue 37)."""
    x, y = noisy(155, classes=classes)
    splits = [DataSplit(train, test) for train, test in stratified_folds(y, 4, 1111)]
    splits.append(DataSplit(np.arange(len(y))))
    penalties = np.array([L2_GRID[:2], L2_GRID[2:], L2_GRID[1:3], L2_GRID[::3], L2_GRID[:2]])
    on_device = sc.fit_grid_torch(x, y, splits, penalties, classes, SHORT[name], device="cpu")
    reference = fit_grid_sequential(x, y, splits, penalties, classes, SHORT[name])
    assert np.array_equal(on_device.accuracy, reference.accuracy)
    np.testing.assert_allclose(on_device.weight, reference.weight, atol=1e-5)
    np.testing.assert_allclose(on_device.bias, reference.bias, atol=1e-5)


@pytest.mark.parametrize("name", ["full", "fast"])
def test_protocols_on_the_torch_trainer_equal_one_at_a_time(name: str) -> None:
    """Inside ``classifier_device`` the protocols train with the torch path: the reference's figures."""
    config = dataclasses.replace(SHORT[name], kfold=3)
    x, y = noisy(90)
    x3, y3 = noisy(150, classes=3, seed=1)
    with sc.classifier_device("cpu"):
        assert sc._TORCH_DEVICE.get() == torch.device("cpu")
        inner = senteval_inner_kfold(x, y, 2, config, seed=7)
        kfold = senteval_kfold(x3[:120], y3[:120], x3[120:], y3[120:], 3, config, seed=7)
        split = senteval_split(x[:50], y[:50], x[50:70], y[50:70], x[70:], y[70:], 2, config)
    assert sc._TORCH_DEVICE.get() is None
    assert inner == senteval_inner_kfold(x, y, 2, config, seed=7, batched=False)
    reference = senteval_kfold(x3[:120], y3[:120], x3[120:], y3[120:], 3, config, seed=7, batched=False)
    assert (kfold.acc, kfold.devacc) == (reference.acc, reference.devacc)
    assert np.array_equal(kfold.predictions, reference.predictions)
    alone = senteval_split(x[:50], y[:50], x[50:70], y[50:70], x[70:], y[70:], 2, config, batched=False)
    assert (split.devacc, split.acc, split.penalties) == (alone.devacc, alone.acc, alone.penalties)


def test_classifiers_go_to_cuda_only_where_the_cpu_kernel_has_few_threads() -> None:
    """Issue 37: on an H200 with 16 threads the CPU kernel was 2x faster than the torch trainer on the GPU."""
    assert sc.torch_classifier_device(None) is None
    assert sc.torch_classifier_device("cpu", threads=1) is None
    few = sc.CPU_KERNEL_MIN_THREADS - 1
    assert sc.torch_classifier_device(torch.device("cuda", 1), threads=few) == torch.device("cuda", 1)
    assert sc.torch_classifier_device(torch.device("cuda", 1), threads=sc.CPU_KERNEL_MIN_THREADS) is None
    assert sc.torch_classifier_device("cuda", threads=16) is None
