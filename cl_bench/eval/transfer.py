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
from cl_bench.eval.registry import ScoreOptions, get_task, load_task, task_sentences
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

Embed = Callable[[Sequence[str]], np.ndarray]
P = ParamSpec("P")
R = TypeVar("R")

#: SentEval's three protocols (``tools/validation.py``): nested k-fold on one labelled set (MR, CR,
#: SUBJ, MPQA), a fixed train/dev/test split (SST-2), k-fold on train then the test set (TREC, MRPC)
PROTOCOLS: dict[str, tuple[str, ...]] = {
    "inner_kfold": ("all",),
    "split": ("train", "dev", "test"),
    "kfold": ("train", "test"),
}
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


def read_binary_ordered(positive_file: str | Path, negative_file: str | Path) -> LabeledTexts:
    """MR/CR/SUBJ/MPQA (positive and negative files) in SentEval's order."""
    data = read_binary_task(positive_file, negative_file)
    return sentevals_order(data.texts, data.labels)


def read_sst_ordered(path: str | Path) -> LabeledTexts:
    """One SST-2 split in SentEval's order."""
    data = read_sst_split(path)
    return sentevals_order(data.texts, data.labels)


def read_trec_ordered(path: str | Path) -> LabeledTexts:
    """One TREC file in SentEval's order."""
    data = read_trec_file(path)
    return sentevals_order(data.texts, data.labels)


def read_mrpc_ordered(path: str | Path) -> LabeledPairs:
    """One MRPC file in SentEval's order."""
    return sentevals_pair_order(read_mrpc_file(path))


def load_transfer_task(data_dir: str | Path, task: str) -> dict[str, LabeledTexts | LabeledPairs]:
    """Parsed data of one transfer task in SentEval's order (cached per file).

    Returns:
        ``{"all": ...}`` for MR/CR/SUBJ/MPQA, ``{"train", "dev", "test"}`` for SST-2,
        ``{"train", "test"}`` for TREC and MRPC (MRPC as :class:`LabeledPairs`).
    """
    if get_task(task).kind != "transfer":
        raise ValueError(f"not a transfer task: '{task}'")
    return load_task(data_dir, task)


def _probe(
    protocol: str,
    n_classes: int,
    parts: dict[str, np.ndarray],
    labels: dict[str, np.ndarray],
    config: str,
    seed: int,
    classifier: str,
    batched: bool,
) -> ProbeResult:
    """Run a protocol (:data:`PROTOCOLS`) with the chosen classifier on a task's features."""
    settings = SENTEVAL_CONFIGS[config]
    if classifier == "senteval":
        if protocol == "inner_kfold":
            return senteval_inner_kfold(parts["all"], labels["all"], n_classes, settings, seed, batched)
        if protocol == "split":
            return senteval_split(
                parts["train"], labels["train"], parts["dev"], labels["dev"], parts["test"], labels["test"],
                n_classes, settings, seed, batched,
            )
        return senteval_kfold(
            parts["train"], labels["train"], parts["test"], labels["test"], n_classes, settings, seed, batched
        )
    if classifier == "sklearn":
        if protocol == "inner_kfold":
            return inner_kfold_probe(parts["all"], labels["all"], settings.kfold, seed)
        if protocol == "split":
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
    """Run one registered transfer task's protocol on embeddings from ``embed``.

    Args:
        task: a transfer task of the registry (``mr``, ``cr``, ``subj``, ``mpqa``, ``sst2``, ``trec``, ``mrpc``, ...).
        parts: from :func:`load_transfer_task`.
        embed: maps sentences to (N, H) embeddings.
        config: ``full`` (SentEval's ``test`` configuration, 10 folds) or ``fast`` (``fasttest``, 5 folds).
        seed: SentEval's seed (1111): the classifiers' and the k-fold shuffles' (InnerKFold's folds
            always use 1111, as SentEval's).
        postprocess: whitening or flow, fitted on all the task's sentences (None: off).
        classifier: ``senteval`` (SentEval's algorithm) or ``sklearn`` (the approximation).
        batched: train SentEval's models together (False: one at a time, the reference; same results).

    Returns:
        See :func:`score_transfer_task`.
    """
    entry = get_task(task)
    if entry.kind != "transfer":
        raise ValueError(f"not a transfer task: '{task}'")
    options = ScoreOptions(postprocess, config, seed, classifier)
    return score_transfer_task(task, parts, embed, options, batched=batched, **entry.scorer_args)


def score_transfer_task(
    name: str,
    parts: dict[str, LabeledTexts | LabeledPairs],
    embed: Embed,
    options: ScoreOptions,
    *,
    protocol: str,
    n_classes: int = 2,
    f1: bool = False,
    batched: bool = True,
) -> dict[str, float]:
    """The registry's transfer scorer: a linear probe on the task's features under a SentEval protocol.

    Args:
        name: the task name (metric key prefix).
        parts: the parts the protocol needs (:data:`PROTOCOLS`), each :class:`LabeledTexts` or, for a
            sentence-pair task, :class:`LabeledPairs` (features ``[|u - v|, u * v]``).
        embed: maps sentences to (N, H) embeddings.
        options: ``transfer_config``, ``seed``, ``classifier`` and ``postprocess`` (fitted on all the
            task's sentences).
        protocol: ``inner_kfold``, ``split`` or ``kfold``.
        n_classes: the number of labels (SentEval's ``nclasses``).
        f1: also report the test F1 of the positive class (``<name>_f1``, MRPC).
        batched: train SentEval's models together (False: one at a time; same results).

    Returns:
        ``{name: test accuracy, f"{name}_dev": SentEval devacc}`` (plus ``f"{name}_f1"``).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"transfer task '{name}': unknown protocol '{protocol}'; valid: {', '.join(PROTOCOLS)}")
    if set(parts) != set(PROTOCOLS[protocol]):
        raise ValueError(f"transfer task '{name}': protocol {protocol} needs the parts {', '.join(PROTOCOLS[protocol])}")
    transform: Callable[[np.ndarray], np.ndarray] = lambda x: x  # noqa: E731
    if options.postprocess is not None:
        transform = options.postprocess.transform_for(embed, task_sentences(parts))

    def features(part: LabeledTexts | LabeledPairs) -> np.ndarray:
        if isinstance(part, LabeledPairs):
            a, b = transform(embed(part.sent1)), transform(embed(part.sent2))
            return np.concatenate([np.abs(a - b), a * b], axis=1)
        return transform(embed(part.texts))

    result = _probe(
        protocol,
        n_classes,
        {part: features(data) for part, data in parts.items()},
        {part: data.labels for part, data in parts.items()},
        options.transfer_config,
        options.seed,
        options.classifier,
        batched,
    )
    scores = {name: float(result.acc), f"{name}_dev": float(result.devacc)}
    if f1:
        assert result.predictions is not None
        scores[f"{name}_f1"] = round(100.0 * float(f1_score(parts["test"].labels, result.predictions)), 2)
    return scores
