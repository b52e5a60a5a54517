"""SentEval transfer tasks: a linear classifier on frozen sentence embeddings.

Two classifiers (``eval.transfer_classifier``):

* ``senteval`` (default): SentEval's own PyTorch logistic regression and validation protocols
  (:mod:`cl_bench.eval.senteval_classifier`), ``full`` = its ``test`` configuration (Adam, 10 folds),
  ``fast`` = ``fasttest`` (RMSprop, 5 folds); ``<task>_dev`` is SentEval's ``devacc``.
* ``sklearn``: an approximation kept for comparison: the same folds and selection rule, but
  scikit-learn's ``LogisticRegression`` (lbfgs, run to convergence, unpenalised intercept, refitted on
  all the training data without a hold-out) with SentEval's L2 grid mapped onto ``C``.

Protocols (SentEval ``tools/validation.py``):

* **MR, CR, SUBJ, MPQA** — nested stratified k-fold (``InnerKFoldClassifier``): the outer k folds
  give the test accuracy; on each outer training part, inner k folds pick the L2 penalty.
* **SST-2** — fixed train/dev/test (``SplitClassifier``): penalty picked on dev.
* **TREC, MRPC** — k-fold on train picks the penalty, then a model trained on train is scored on
  the standard test set (``KFoldClassifier``). MRPC features are ``[|u - v|, u * v]`` and the test
  F1 of the positive class is reported too.
* Folds: ``StratifiedKFold(k, shuffle=True, random_state=seed)`` over the samples in SentEval's
  order — each split sorted by (number of words, label), MRPC by (words in A, words in B, label) —
  because SentEval sorts before it encodes and builds the folds.

sklearn's penalty mapping: SentEval minimises ``mean cross-entropy + (l2/2) ||W||^2`` (on a softmax
layer with one row per class); scikit-learn minimises ``C * sum cross-entropy + ||w||^2 / 2``. For
k > 2 classes (TREC) the two agree when ``C = 1 / (l2 * n_train)``; for two classes scikit-learn fits
one vector ``w = W_1 - W_0`` and SentEval's optimum has ``W_1 = -W_0 = w / 2``, i.e. ``(l2/4) ||w||^2``,
so ``C = 2 / (l2 * n_train)``. The solves run on one BLAS/OpenMP thread (deterministic results).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ParamSpec, TypeVar

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from threadpoolctl import threadpool_limits

from cl_bench.data.senteval import (
    LabeledPairs,
    LabeledTexts,
    read_binary_task,
    read_mrpc_file,
    read_sst_split,
    read_trec_file,
)
from cl_bench.eval.postprocess import PostProcess
from cl_bench.eval.senteval_classifier import (
    L2_GRID,
    SENTEVAL_CONFIGS,
    SENTEVAL_SEED,
    ProbeResult,
    senteval_inner_kfold,
    senteval_kfold,
    senteval_split,
    stratified_folds,
)
from cl_bench.eval.tasks import TRANSFER_FILES

Embed = Callable[[Sequence[str]], np.ndarray]
P = ParamSpec("P")
R = TypeVar("R")

BINARY_TASKS: tuple[str, ...] = ("mr", "cr", "subj", "mpqa")
#: Convergence settings of the lbfgs solver (tight enough that reruns agree to the last digit).
MAX_ITER = 2000
TOL = 1e-6


def single_threaded(function: Callable[P, R]) -> Callable[P, R]:
    """Run ``function`` with BLAS and OpenMP limited to one thread.

    The hundreds of small lbfgs solves of a probe are latency-bound: multi-threaded BLAS and
    scikit-learn's OpenMP loss only add synchronisation (about 10x slower on a busy 2-core machine).
    """

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with threadpool_limits(limits=1):
            return function(*args, **kwargs)

    return wrapper


def penalty_to_c(l2: float, n_train: int, n_classes: int) -> float:
    """scikit-learn's ``C`` equivalent to SentEval's L2 penalty (see the module docstring)."""
    return (2.0 if n_classes == 2 else 1.0) / (l2 * n_train)


def fit_logistic_regression(
    x: np.ndarray,
    y: np.ndarray,
    l2: float,
    seed: int = SENTEVAL_SEED,
    init: LogisticRegression | None = None,
) -> LogisticRegression:
    """Fit the linear probe with penalty ``l2`` (SentEval's weight decay) on features ``x``.

    Args:
        x: (N, D) features.
        y: (N,) integer labels.
        l2: SentEval's L2 penalty.
        seed: passed to scikit-learn (lbfgs is deterministic; kept for solver changes).
        init: a fitted model whose weights start the solver (a warm start; the optimum is the same).
    """
    n_classes = len(np.unique(y))
    model = LogisticRegression(
        C=penalty_to_c(l2, len(y), max(n_classes, 2)),
        solver="lbfgs",
        max_iter=MAX_ITER,
        tol=TOL,
        random_state=seed,
        warm_start=init is not None,
    )
    if init is not None:
        model.coef_ = init.coef_.copy()
        model.intercept_ = init.intercept_.copy()
    return model.fit(x, y)


def accuracy100(model: LogisticRegression, x: np.ndarray, y: np.ndarray) -> float:
    """Accuracy x 100."""
    return 100.0 * float(model.score(x, y))


def _cv_scores(
    x: np.ndarray, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]], seed: int
) -> tuple[list[float], LogisticRegression]:
    """Mean fold accuracy for each penalty of the grid, rounded to 2 decimals (SentEval).

    The 4 x k fits are chained with warm starts along a "snake" path (strong to weak penalty on
    one fold, weak to strong on the next), so each solve starts next to its optimum; the optima
    are those of cold starts, reached in a fraction of the iterations.

    Returns:
        The rounded scores per penalty, and the last fitted model (a warm start for the refit).
    """
    accuracy = np.zeros((len(folds), len(L2_GRID)))
    path = list(range(len(L2_GRID)))[::-1]  # strongest penalty (fewest iterations from zero) first
    model: LogisticRegression | None = None
    for fold, (train_idx, test_idx) in enumerate(folds):
        for grid_idx in path if fold % 2 == 0 else path[::-1]:
            model = fit_logistic_regression(x[train_idx], y[train_idx], L2_GRID[grid_idx], seed, init=model)
            accuracy[fold, grid_idx] = accuracy100(model, x[test_idx], y[test_idx])
    assert model is not None
    return [round(float(score), 2) for score in accuracy.mean(axis=0)], model


@single_threaded
def inner_kfold_probe(x: np.ndarray, y: np.ndarray, kfold: int, seed: int = SENTEVAL_SEED) -> ProbeResult:
    """scikit-learn approximation of SentEval's ``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA)."""
    dev_scores, test_scores, chosen = [], [], []
    for train_idx, test_idx in stratified_folds(y, kfold, seed):
        x_train, y_train = x[train_idx], y[train_idx]
        scores, last = _cv_scores(x_train, y_train, stratified_folds(y_train, kfold, seed), seed)
        best = int(np.argmax(scores))
        dev_scores.append(scores[best])
        chosen.append(L2_GRID[best])
        model = fit_logistic_regression(x_train, y_train, L2_GRID[best], seed, init=last)
        test_scores.append(round(accuracy100(model, x[test_idx], y[test_idx]), 2))
    return ProbeResult(
        round(float(np.mean(dev_scores)), 2), round(float(np.mean(test_scores)), 2), tuple(chosen)
    )


@single_threaded
def kfold_probe(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    kfold: int,
    seed: int = SENTEVAL_SEED,
) -> ProbeResult:
    """scikit-learn approximation of SentEval's ``KFoldClassifier``: k folds pick the penalty, refit on all train."""
    scores, last = _cv_scores(x_train, y_train, stratified_folds(y_train, kfold, seed), seed)
    best = int(np.argmax(scores))
    model = fit_logistic_regression(x_train, y_train, L2_GRID[best], seed, init=last)
    return ProbeResult(
        scores[best], round(accuracy100(model, x_test, y_test), 2), (L2_GRID[best],), model.predict(x_test)
    )


@single_threaded
def split_probe(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_dev: np.ndarray,
    y_dev: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    seed: int = SENTEVAL_SEED,
) -> ProbeResult:
    """scikit-learn approximation of SentEval's ``SplitClassifier``: penalty picked on dev, scored on test."""
    fitted: dict[float, LogisticRegression] = {}
    model: LogisticRegression | None = None
    for l2 in sorted(L2_GRID, reverse=True):  # strongest penalty first, each fit warm-starting the next
        model = fitted[l2] = fit_logistic_regression(x_train, y_train, l2, seed, init=model)
    models = [fitted[l2] for l2 in L2_GRID]
    scores = [round(accuracy100(model, x_dev, y_dev), 2) for model in models]
    best = int(np.argmax(scores))
    model = models[best]  # SentEval refits the chosen penalty on train: this is that fit
    return ProbeResult(
        scores[best], round(accuracy100(model, x_test, y_test), 2), (L2_GRID[best],), model.predict(x_test)
    )


# ------------------------------------------------------------------------------------------------
# Data in SentEval's order
# ------------------------------------------------------------------------------------------------
def n_words(text: str) -> int:
    """Length of SentEval's word list for a (space-joined) sentence."""
    return len(text.split())


def sentevals_order(texts: Sequence[str], labels: np.ndarray) -> LabeledTexts:
    """Stable sort by (number of words, label), as SentEval does before batching and folding."""
    order = sorted(range(len(texts)), key=lambda i: (n_words(texts[i]), int(labels[i])))
    return LabeledTexts(tuple(texts[i] for i in order), labels[order])


def sentevals_pair_order(pairs: LabeledPairs) -> LabeledPairs:
    """MRPC's SentEval order: stable sort by (words in A, words in B, label)."""
    order = sorted(
        range(len(pairs)),
        key=lambda i: (n_words(pairs.sent1[i]), n_words(pairs.sent2[i]), int(pairs.labels[i])),
    )
    return LabeledPairs(
        tuple(pairs.sent1[i] for i in order), tuple(pairs.sent2[i] for i in order), pairs.labels[order]
    )


@functools.lru_cache(maxsize=32)
def _load(root: str, task: str) -> dict[str, LabeledTexts | LabeledPairs]:
    files = [Path(root) / relative for relative in TRANSFER_FILES[task]]
    if task in BINARY_TASKS:
        data = read_binary_task(files[0], files[1])
        return {"all": sentevals_order(data.texts, data.labels)}
    if task == "sst2":
        splits = [read_sst_split(path) for path in files]
        return {
            name: sentevals_order(d.texts, d.labels)
            for name, d in zip(("train", "dev", "test"), splits, strict=True)
        }
    if task == "trec":
        splits = [read_trec_file(path) for path in files]
        return {
            name: sentevals_order(d.texts, d.labels)
            for name, d in zip(("train", "test"), splits, strict=True)
        }
    if task == "mrpc":
        return {
            name: sentevals_pair_order(read_mrpc_file(path))
            for name, path in zip(("train", "test"), files, strict=True)
        }
    raise ValueError(f"not a transfer task: '{task}'")


def load_transfer_task(data_dir: str | Path, task: str) -> dict[str, LabeledTexts | LabeledPairs]:
    """Parsed data of one transfer task in SentEval's order (cached per data root).

    Returns:
        ``{"all": ...}`` for MR/CR/SUBJ/MPQA, ``{"train", "dev", "test"}`` for SST-2,
        ``{"train", "test"}`` for TREC and MRPC (MRPC as :class:`LabeledPairs`).
    """
    return dict(_load(str(Path(data_dir).expanduser().resolve()), task))


def task_sentences(parts: dict[str, LabeledTexts | LabeledPairs]) -> list[str]:
    """Every sentence of a transfer task (duplicates kept)."""
    texts: list[str] = []
    for part in parts.values():
        texts += [*part.sent1, *part.sent2] if isinstance(part, LabeledPairs) else list(part.texts)
    return texts


def _probe(
    task: str,
    parts: dict[str, np.ndarray],
    labels: dict[str, np.ndarray],
    config: str,
    seed: int,
    classifier: str,
    batched: bool,
) -> ProbeResult:
    """Run the task's protocol with the chosen classifier on its features."""
    n_classes = 6 if task == "trec" else 2
    settings = SENTEVAL_CONFIGS[config]
    if classifier == "senteval":
        if task in BINARY_TASKS:
            return senteval_inner_kfold(parts["all"], labels["all"], n_classes, settings, seed, batched)
        if task == "sst2":
            return senteval_split(
                parts["train"], labels["train"], parts["dev"], labels["dev"], parts["test"], labels["test"],
                n_classes, settings, seed, batched,
            )
        return senteval_kfold(
            parts["train"], labels["train"], parts["test"], labels["test"], n_classes, settings, seed, batched
        )
    if classifier == "sklearn":
        if task in BINARY_TASKS:
            return inner_kfold_probe(parts["all"], labels["all"], settings.kfold, seed)
        if task == "sst2":
            return split_probe(
                parts["train"], labels["train"], parts["dev"], labels["dev"], parts["test"], labels["test"], seed
            )
        return kfold_probe(parts["train"], labels["train"], parts["test"], labels["test"], settings.kfold, seed)
    raise ValueError(f"unknown transfer classifier '{classifier}' (senteval | sklearn)")


def run_transfer_task(
    task: str,
    parts: dict[str, LabeledTexts | LabeledPairs],
    embed: Embed,
    config: str = "full",
    seed: int = SENTEVAL_SEED,
    postprocess: PostProcess | None = None,
    classifier: str = "senteval",
    batched: bool = True,
) -> dict[str, float]:
    """Run one transfer task's protocol on embeddings from ``embed``.

    Args:
        task: ``mr``, ``cr``, ``subj``, ``mpqa``, ``sst2``, ``trec`` or ``mrpc``.
        parts: from :func:`load_transfer_task`.
        embed: maps sentences to (N, H) embeddings.
        config: ``full`` (SentEval's ``test`` configuration, 10 folds) or ``fast`` (``fasttest``, 5 folds).
        seed: SentEval's seed (1111): the classifiers' and the k-fold shuffles' (InnerKFold's folds
            always use 1111, as SentEval's).
        postprocess: whitening or flow, fitted on all the task's sentences (None: off).
        classifier: ``senteval`` (SentEval's algorithm) or ``sklearn`` (the approximation).
        batched: train SentEval's models together (False: one at a time, the reference; same results).

    Returns:
        ``{task: test accuracy, f"{task}_dev": SentEval devacc}`` plus ``mrpc_f1`` for MRPC.
    """
    if task not in TRANSFER_FILES:
        raise ValueError(f"not a transfer task: '{task}'")
    transform: Callable[[np.ndarray], np.ndarray] = lambda x: x  # noqa: E731
    if postprocess is not None:
        transform = postprocess.transform_for(embed, task_sentences(parts))

    def features(part: LabeledTexts | LabeledPairs) -> np.ndarray:
        if isinstance(part, LabeledPairs):
            a, b = transform(embed(part.sent1)), transform(embed(part.sent2))
            return np.concatenate([np.abs(a - b), a * b], axis=1)
        return transform(embed(part.texts))

    result = _probe(
        task,
        {name: features(part) for name, part in parts.items()},
        {name: part.labels for name, part in parts.items()},
        config,
        seed,
        classifier,
        batched,
    )
    scores = {task: float(result.acc), f"{task}_dev": float(result.devacc)}
    if task == "mrpc":
        assert result.predictions is not None
        scores[f"{task}_f1"] = round(100.0 * float(f1_score(parts["test"].labels, result.predictions)), 2)
    return scores
