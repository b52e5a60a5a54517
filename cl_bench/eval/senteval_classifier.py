"""SentEval's transfer classifier (``usepytorch=True``, ``nhid=0``), reproduced, and trained in batches.

What SentEval does (``senteval/tools/classifier.py``, ``validation.py`` at commit 5d6dc117), and so
what every model here does:

* A logistic regression ``nn.Linear(dim, classes)`` trained on mean cross-entropy (SentEval sets
  ``loss_fn.size_average = False`` after construction, which PyTorch >= 0.4 ignores) by Adam
  (``full`` = SentEval's ``test`` config: batch 64, tenacity 5, epoch_size 4) or RMSprop (``fast`` =
  ``fasttest``: batch 128, tenacity 3, epoch_size 2), both with PyTorch's default hyper-parameters;
  the L2 penalty is the optimiser's ``weight_decay``, so it also acts on the bias.
* Every model seeds ``np.random`` and ``torch`` with the seed (1111) when it is built, so its
  initial weights (``nn.Linear``'s default init) and its data order are those of a fresh seed: a
  ``np.random.permutation`` of its training rows per epoch, preceded, when it holds out 5% of its
  data for early stopping, by the permutation that picks the hold-out (the first ``int(0.05 n)``).
* Training runs ``epoch_size`` epochs, then scores the validation part; a new best accuracy keeps a
  copy of the model; otherwise a non-improvement counter (never reset) stops training once it has
  reached ``tenacity`` before the increment, i.e. at the ``tenacity + 1``-th non-improvement. It
  also stops when the epoch counter passes 200. The model kept is the best one; its validation
  accuracy is the figure SentEval averages into ``devacc``.

Because each model's randomness is re-seeded at construction, the models of a grid search are
independent of one another. :func:`fit_grid` therefore trains all of a task's models in one compiled
program (numba, :mod:`cl_bench.eval._senteval_kernel`): every (split x L2 value) model, the
protocols' final refits included (trained for every L2 value beside the scan, since their penalty is
only known after it; the chosen ones are kept), each model with its own data order (the
permutations a fresh ``RandomState(seed)`` gives, drawn beforehand in Python and shared between
models whose data have the same size), its own optimiser state and its own stopping state. Splits
need no lock-step: each one's models train through all their epochs on one thread, the splits
spread over ``torch.get_num_threads()`` threads; a split's models share each minibatch row, read
once for the logits of all of them and once for their gradient, their weights side by side in one
cache-resident block. :func:`fit_grid_sequential` trains the models one at a time with
``torch.nn``/``torch.optim``, exactly as SentEval's loop does, and only the chosen refits; it is the
reference the compiled trainer is tested against (same accuracies and predictions; weights equal up
to float32 rounding, as the summation orders of the two differ). ``benchmarks/bench_transfer_classifier.py``
times it against the previous trainer (one batched torch program per protocol stage).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold
from torch import nn

#: SentEval's L2 grid for its PyTorch classifier: ``[10**t for t in range(-5, -1)]``.
L2_GRID: tuple[float, ...] = (1e-5, 1e-4, 1e-3, 1e-2)
#: SentEval's default seed (``params.seed``).
SENTEVAL_SEED = 1111
#: Share of the training data held out for early stopping in the final fits (``validation_split``).
VALIDATION_SPLIT = 0.05


@dataclass(frozen=True)
class ClassifierConfig:
    """SentEval's ``params.classifier`` plus ``params.kfold``.

    Attributes:
        kfold: folds of the cross-validation.
        optim: ``adam`` or ``rmsprop`` (PyTorch defaults: lr 1e-3 / 1e-2).
        batch_size: minibatch size.
        tenacity: non-improvements tolerated before stopping.
        epoch_size: epochs between two validation scores.
        max_epoch: training stops once the epoch counter exceeds this.
    """

    kfold: int
    optim: str
    batch_size: int
    tenacity: int
    epoch_size: int
    max_epoch: int = 200


#: ``full``: SentEval's ``test`` configuration; ``fast``: its ``fasttest`` (SimCSE's ``--mode fasttest``).
SENTEVAL_CONFIGS: dict[str, ClassifierConfig] = {
    "full": ClassifierConfig(kfold=10, optim="adam", batch_size=64, tenacity=5, epoch_size=4),
    "fast": ClassifierConfig(kfold=5, optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2),
}


@dataclass(frozen=True)
class DataSplit:
    """Rows of a feature matrix that one model trains and early-stops on.

    Attributes:
        train: training rows.
        valid: validation rows; None holds out SentEval's 5% of ``train`` (``validation_split=0.05``).
    """

    train: np.ndarray
    valid: np.ndarray | None = None


@dataclass(frozen=True)
class GridResult:
    """Fitted models of a grid (data splits x L2 values).

    Attributes:
        accuracy: (S, R) best validation accuracy of each model (a fraction, as SentEval's ``fit``).
        weight: (S, R, C, D) weights of the kept (best) models.
        bias: (S, R, C) their biases.
    """

    accuracy: np.ndarray
    weight: np.ndarray
    bias: np.ndarray

    def predict(self, split: int, l2_index: int, x: np.ndarray) -> np.ndarray:
        """Class predictions of one model on features ``x`` (argmax of the logits)."""
        features = torch.from_numpy(np.asarray(x, dtype=np.float32))  # SentEval scores in float32
        logits = features @ torch.from_numpy(self.weight[split, l2_index]).T
        return (logits + torch.from_numpy(self.bias[split, l2_index])).argmax(1).numpy()


class _Permutations:
    """The permutations a model seeded with ``seed`` draws: SentEval seeds ``np.random`` per model,
    so models with the same number of rows share them; they are drawn once and cached."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.streams: dict[tuple[int, bool], tuple[np.random.RandomState, list[np.ndarray]]] = {}

    def holdout(self, n: int) -> np.ndarray:
        """The permutation of ``fit(validation_split=...)``: the first draw after seeding."""
        return np.random.RandomState(self.seed).permutation(n)

    def epoch(self, n_total: int, holdout: bool, n_train: int, index: int) -> np.ndarray:
        """The ``index``-th epoch's permutation of a model over ``n_train`` rows."""
        key = (n_total, holdout)
        if key not in self.streams:
            rng = np.random.RandomState(self.seed)
            if holdout:
                rng.permutation(n_total)
            self.streams[key] = (rng, [])
        rng, drawn = self.streams[key]
        while len(drawn) <= index:
            drawn.append(rng.permutation(n_train))
        return drawn[index]


def _resolve(split: DataSplit, seed: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(train rows, validation rows, held out?) of a split, SentEval's hold-out applied."""
    if split.valid is not None:
        return np.asarray(split.train), np.asarray(split.valid), False
    n = len(split.train)
    permutation = _Permutations(seed).holdout(n)
    cut = int(VALIDATION_SPLIT * n)
    return np.asarray(split.train)[permutation[cut:]], np.asarray(split.train)[permutation[:cut]], True


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one thread, then restore the caller's setting.

    The classifier's tensors are small: a second thread mostly adds synchronisation, and on a busy
    machine its spin-waits cost several times the useful CPU time (measured: ~10x per round of TREC).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def initial_linear(dim: int, n_classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``nn.Linear(dim, n_classes)``'s default initialisation right after ``torch.manual_seed(seed)``.

    The global torch RNG is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = nn.Linear(dim, n_classes)
    return layer.weight.detach().clone(), layer.bias.detach().clone()


# ------------------------------------------------------------------------------------------------
# One model at a time (SentEval's loop, with torch.nn and torch.optim)
# ------------------------------------------------------------------------------------------------
def _optimizer(name: str, parameters: Sequence[torch.Tensor], l2: float) -> torch.optim.Optimizer:
    """SentEval's ``utils.get_optimizer(name)`` with ``param_groups[0]['weight_decay'] = l2``."""
    if name == "adam":
        optimizer: torch.optim.Optimizer = torch.optim.Adam(parameters)
    elif name == "rmsprop":
        optimizer = torch.optim.RMSprop(parameters)
    else:
        raise ValueError(f"unknown optimiser '{name}' (adam | rmsprop)")
    optimizer.param_groups[0]["weight_decay"] = l2
    return optimizer


def fit_one(
    x: np.ndarray,
    y: np.ndarray,
    split: DataSplit,
    l2: float,
    n_classes: int,
    config: ClassifierConfig,
    seed: int = SENTEVAL_SEED,
) -> tuple[float, nn.Linear]:
    """Train one SentEval logistic regression (``MLP(nhid=0).fit``) on rows of ``x``.

    Returns:
        The best validation accuracy (a fraction) and the model that reached it.
    """
    train_rows, valid_rows, holdout = _resolve(split, seed)
    permutations = _Permutations(seed)
    x = np.asarray(x, dtype=np.float32)  # SentEval trains in float32
    x_train, y_train = torch.from_numpy(x[train_rows]), torch.from_numpy(y[train_rows]).long()
    x_valid, y_valid = torch.from_numpy(x[valid_rows]), torch.from_numpy(y[valid_rows]).long()
    weight, bias = initial_linear(x.shape[1], n_classes, seed)
    model = nn.Linear(x.shape[1], n_classes)
    with torch.no_grad():
        model.weight.copy_(weight)
        model.bias.copy_(bias)
    optimizer = _optimizer(config.optim, list(model.parameters()), l2)
    loss_fn = nn.CrossEntropyLoss()
    best_accuracy, best_model, non_improvements, epoch = -1.0, model, 0, 0
    while epoch <= config.max_epoch:
        for index in range(epoch, epoch + config.epoch_size):
            order = torch.from_numpy(permutations.epoch(len(split.train), holdout, len(train_rows), index))
            for start in range(0, len(train_rows), config.batch_size):
                batch = order[start : start + config.batch_size]
                loss = loss_fn(model(x_train[batch]), y_train[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        epoch += config.epoch_size
        with torch.no_grad():
            accuracy = float((model(x_valid).argmax(1) == y_valid).sum()) / len(valid_rows)
        if accuracy > best_accuracy:
            best_accuracy, best_model = accuracy, copy.deepcopy(model)
        else:
            if non_improvements >= config.tenacity:
                break
            non_improvements += 1
    return best_accuracy, best_model


@one_torch_thread()
def fit_grid_sequential(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[DataSplit],
    l2s: Sequence[float] | np.ndarray,
    n_classes: int,
    config: ClassifierConfig,
    seed: int = SENTEVAL_SEED,
) -> GridResult:
    """:func:`fit_one` for every (split, L2) pair, one model after the other (the reference).

    Takes the arguments of :func:`fit_grid`.
    """
    l2_table = np.broadcast_to(np.asarray(l2s, dtype=np.float64), (len(splits), np.shape(l2s)[-1]))
    shape = l2_table.shape
    accuracy = np.zeros(shape)
    weight = np.zeros((*shape, n_classes, x.shape[1]), dtype=np.float32)
    bias = np.zeros((*shape, n_classes), dtype=np.float32)
    for s, split in enumerate(splits):
        for r, l2 in enumerate(l2_table[s]):
            accuracy[s, r], model = fit_one(x, y, split, float(l2), n_classes, config, seed)
            weight[s, r] = model.weight.detach().numpy()
            bias[s, r] = model.bias.detach().numpy()
    return GridResult(accuracy, weight, bias)


# ------------------------------------------------------------------------------------------------
# All models at once
# ------------------------------------------------------------------------------------------------
#: Epochs whose permutations are drawn (and handed to the kernel) at a time: most models stop well
#: before SentEval's 200, so the permutations are drawn in chunks rather than all up front.
_CHUNK_VALIDATIONS = 12


def fit_grid(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[DataSplit],
    l2s: Sequence[float] | np.ndarray,
    n_classes: int,
    config: ClassifierConfig,
    seed: int = SENTEVAL_SEED,
) -> GridResult:
    """Train SentEval's model for every (split, L2) pair in one compiled program
    (:mod:`cl_bench.eval._senteval_kernel`), a split per thread on ``torch.get_num_threads()``
    threads; the models of :func:`fit_grid_sequential` up to float rounding.

    Every model keeps SentEval's own data order (its split's rows in the permutations a fresh
    ``RandomState(seed)`` draws, drawn here beforehand), its own optimiser state and its own stopping
    state. The models of a split see the same minibatches, so one pass over a minibatch row serves
    all of them. Splits are independent: each trains through all its epochs on its own thread.

    Args:
        x: (N, D) features (trained in float32, as SentEval).
        y: (N,) labels in ``0 .. n_classes - 1``.
        splits: the data splits (a split's models share data and data order).
        l2s: the L2 penalties tried on every split (R,), or per split (S, R).
        n_classes: number of classes.
        config: SentEval's classifier configuration.
        seed: SentEval's seed.
    """
    import numba  # lazily: only a transfer task's classifiers need it

    from cl_bench.eval import _senteval_kernel as kernel

    l2_table = np.broadcast_to(np.asarray(l2s, dtype=np.float64), (len(splits), np.shape(l2s)[-1]))
    n_splits, n_l2 = l2_table.shape
    dim, width = x.shape[1], n_l2 * n_classes
    blocks = -(-width // kernel.LANES)
    resolved = [_resolve(split, seed) for split in splits]
    features = np.ascontiguousarray(x, dtype=np.float32)
    labels = np.asarray(y).astype(np.int32)
    train = np.concatenate([rows for rows, _, _ in resolved]).astype(np.int32)
    train_offsets = np.cumsum([0] + [len(rows) for rows, _, _ in resolved]).astype(np.int64)
    valid = np.concatenate([rows for _, rows, _ in resolved]).astype(np.int32)
    valid_offsets = np.cumsum([0] + [len(rows) for _, rows, _ in resolved]).astype(np.int64)
    # the data order of a split is that of a fresh RandomState(seed) over its size (after the
    # hold-out's permutation): splits with the same key share one stream of permutations
    keys = [(len(split.train), holdout, len(rows)) for split, (rows, _, holdout) in zip(splits, resolved, strict=True)]
    streams = sorted(set(keys))
    stream = np.array([streams.index(key) for key in keys], dtype=np.int64)
    generators = []
    for total, holdout, _ in streams:
        generator = np.random.RandomState(seed)
        if holdout:
            generator.permutation(total)  # the hold-out's draw
        generators.append(generator)
    # weight[s, d, block, lane]: lane r * C + c of split s is model (s, r)'s class c; row D is the bias
    init_weight, init_bias = initial_linear(dim, n_classes, seed)
    lanes = np.zeros((dim + 1, blocks * kernel.LANES), dtype=np.float32)
    lanes[:, :width] = np.tile(torch.cat([init_weight, init_bias[:, None]], 1).numpy().T, (1, n_l2))
    weight = np.broadcast_to(lanes.reshape(dim + 1, blocks, kernel.LANES), (n_splits, dim + 1, blocks, kernel.LANES)).copy()
    first, second, best = np.zeros_like(weight), np.zeros_like(weight), weight.copy()
    decay = np.zeros((n_splits, dim + 1, blocks * kernel.LANES), dtype=np.float32)  # each weight's penalty
    decay[:, :, :width] = np.repeat(l2_table.astype(np.float32), n_classes, axis=1)[:, None]
    decay = decay.reshape(weight.shape)
    best_count = np.full((n_splits, n_l2), -1, dtype=np.int64)
    non_improvements = np.zeros((n_splits, n_l2), dtype=np.int64)
    stopped = np.zeros((n_splits, n_l2), dtype=np.bool_)
    counters = np.zeros((n_splits, 2), dtype=np.int64)  # optimiser steps, epoch
    if config.optim == "adam":  # torch.optim.Adam's defaults: lr, eps, beta1, beta2, 1 - beta1, 1 - beta2
        constants = np.array([1e-3, 1e-8, 0.9, 0.999, 1 - 0.9, 1 - 0.999])
    elif config.optim == "rmsprop":  # torch.optim.RMSprop's: lr, eps, alpha, 1 - alpha
        constants = np.array([1e-2, 1e-8, 0.99, 1 - 0.99])
    else:
        raise ValueError(f"unknown optimiser '{config.optim}' (adam | rmsprop)")
    chunk = _CHUNK_VALIDATIONS * config.epoch_size
    # larger splits (the refits) first: with one split per thread at a time, the last to start are short
    schedule = np.argsort(-np.diff(train_offsets), kind="stable")
    torch_threads = torch.get_num_threads()
    # numba's OpenMP layer shares torch's OpenMP runtime: setting its threads sets torch's, restored below
    numba.set_num_threads(max(1, min(torch_threads, numba.config.NUMBA_NUM_THREADS)))
    try:
        epoch = 0
        while True:
            going = (counters[:, 1] == epoch) & (epoch <= config.max_epoch) & ~stopped.all(1)
            if not going.any():
                break
            permutations = np.zeros((len(streams), chunk, max(key[2] for key in streams)), dtype=np.int32)
            for index in np.unique(stream[going]):
                for e in range(chunk):
                    permutations[index, e, : streams[index][2]] = generators[index].permutation(streams[index][2])
            with numba.parallel_chunksize(1):  # a split per thread at a time (they stop at different epochs)
                kernel.train_splits(
                    features, labels, train, train_offsets, valid, valid_offsets, permutations, stream, schedule,
                    epoch, weight, first, second, best, decay, best_count, non_improvements, stopped, counters,
                    n_classes, config.batch_size, config.tenacity, config.epoch_size, config.max_epoch,
                    config.optim == "adam", constants,
                )
            epoch += chunk
    finally:
        torch.set_num_threads(torch_threads)
    kept = best.reshape(n_splits, dim + 1, -1)[:, :, :width].reshape(n_splits, dim + 1, n_l2, n_classes)
    accuracy = best_count / np.diff(valid_offsets)[:, None]
    return GridResult(accuracy, np.ascontiguousarray(kept[:, :dim].transpose(0, 2, 3, 1)),
                      np.ascontiguousarray(kept[:, dim]))


# ------------------------------------------------------------------------------------------------
# All models at once, as torch code on a device (the GPU path)
# ------------------------------------------------------------------------------------------------
#: The device :func:`fit_grid_torch` trains on inside :func:`classifier_device` (None: the numba CPU kernel).
_TORCH_DEVICE: contextvars.ContextVar[torch.device | None] = contextvars.ContextVar("senteval_torch_device", default=None)


@contextlib.contextmanager
def classifier_device(device: torch.device | str | None) -> Iterator[None]:
    """Train the protocols' batched classifiers with :func:`fit_grid_torch` on ``device`` inside this block
    (SentEval's ``usepytorch`` on the encoder's GPU); None keeps the compiled CPU kernel (:func:`fit_grid`).

    :func:`cl_bench.eval.evaluate` enters it with the encoder's device when that is a CUDA device.
    """
    token = _TORCH_DEVICE.set(None if device is None else torch.device(device))
    try:
        yield
    finally:
        _TORCH_DEVICE.reset(token)


#: Fewest torch threads at which the compiled CPU kernel trains the classifiers even with the encoder on CUDA.
#: Measured (issue 37, one H200 with 16 CPU threads, bert-base features, the 7 transfer tasks, full config):
#: CPU kernel 24.7 s, ``fit_grid_torch`` on the GPU 51.2 s (launch-bound: ~20 small kernels per minibatch from
#: Python). The kernel runs a split per thread and a task has at most 10 splits, so below 10 threads its time
#: grows about as 10/threads: the two cross near 5 threads (an extrapolation of that one measurement).
CPU_KERNEL_MIN_THREADS = 5


def torch_classifier_device(
    encoder_device: torch.device | str | None, threads: int | None = None
) -> torch.device | None:
    """The device of :func:`classifier_device` for an encoder on ``encoder_device``: the compiled CPU kernel (None)
    for CPU encoders, and for CUDA encoders too when torch has at least :data:`CPU_KERNEL_MIN_THREADS` threads
    (``threads``; None: ``torch.get_num_threads()``), where it was measured faster; the CUDA device otherwise."""
    if encoder_device is None:
        return None
    device = torch.device(encoder_device)
    if device.type != "cuda":
        return None
    threads = torch.get_num_threads() if threads is None else threads
    return None if threads >= CPU_KERNEL_MIN_THREADS else device


def _batched_trainer() -> Callable[..., GridResult]:
    """:func:`fit_grid` (the CPU kernel), or :func:`fit_grid_torch` on the :func:`classifier_device`'s device."""
    device = _TORCH_DEVICE.get()
    if device is None:
        return fit_grid
    return lambda *args, **kwargs: fit_grid_torch(*args, device=device, **kwargs)


def fit_grid_torch(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[DataSplit],
    l2s: Sequence[float] | np.ndarray,
    n_classes: int,
    config: ClassifierConfig,
    seed: int = SENTEVAL_SEED,
    device: torch.device | str = "cpu",
) -> GridResult:
    """:func:`fit_grid`'s models trained as batched torch code on ``device`` (the GPU path; on CPU it is
    tested against :func:`fit_grid_sequential`: same accuracies, weights up to float32 rounding).

    Every data split's models advance in lock-step: one ``baddbmm`` gives the logits of every model of
    every split still training on a minibatch, one ``bmm`` their gradients, and the optimiser updates
    all of them at once; a split whose epoch has fewer minibatches keeps its state on the extra steps
    (``torch.where``, no host round trip). The host reads the device only at a validation point (every
    ``epoch_size`` epochs: the correct counts, for SentEval's stopping rule); each epoch's minibatch rows
    (SentEval's permutations, drawn on the host) go to the device once per epoch.

    Takes the arguments of :func:`fit_grid`, plus ``device``.
    """
    device = torch.device(device)
    l2_table = np.broadcast_to(np.asarray(l2s, dtype=np.float64), (len(splits), np.shape(l2s)[-1]))
    n_splits, n_l2 = l2_table.shape
    dim, width, batch = x.shape[1], l2_table.shape[1] * n_classes, config.batch_size
    resolved = [_resolve(split, seed) for split in splits]
    permutations = _Permutations(seed)
    features = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)
    labels = torch.from_numpy(np.asarray(y).astype(np.int64)).to(device)
    init_weight, init_bias = initial_linear(dim, n_classes, seed)
    # model (s, r) is column block r of weight[s]: the logits of a split's minibatch are one matmul
    weight = init_weight.T.repeat(n_splits, 1, n_l2).contiguous().to(device)  # (S, D, R*C)
    bias = init_bias.repeat(n_splits, 1, n_l2).contiguous().to(device)  # (S, 1, R*C)
    decay = torch.tensor(l2_table, dtype=torch.float32).repeat_interleave(n_classes, dim=1).unsqueeze(1).to(device)
    first_w, second_w = torch.zeros_like(weight), torch.zeros_like(weight)
    first_b, second_b = torch.zeros_like(bias), torch.zeros_like(bias)
    steps = torch.zeros(n_splits, dtype=torch.float64, device=device)  # optimiser steps per split
    best_weight, best_bias = weight.clone(), bias.clone()
    best_count = np.full((n_splits, n_l2), -1, dtype=np.int64)
    stopped = np.zeros((n_splits, n_l2), dtype=bool)
    non_improvements = np.zeros((n_splits, n_l2), dtype=np.int64)
    n_train = np.array([len(train) for train, _, _ in resolved])
    n_valid = np.array([len(valid) for _, valid, _ in resolved])
    # validation rows padded to the longest split's (padding: row 0, masked out of the counts)
    valid_rows = np.zeros((n_splits, int(n_valid.max(initial=1))), dtype=np.int64)
    for s, (_, valid, _) in enumerate(resolved):
        valid_rows[s, : len(valid)] = valid
    valid_rows_t = torch.from_numpy(valid_rows).to(device)
    valid_mask = torch.from_numpy(np.arange(valid_rows.shape[1])[None] < n_valid[:, None]).to(device)
    adam = config.optim == "adam"
    if config.optim not in ("adam", "rmsprop"):
        raise ValueError(f"unknown optimiser '{config.optim}' (adam | rmsprop)")
    active = np.arange(n_splits)
    epoch = 0
    while epoch <= config.max_epoch and len(active):
        act = torch.from_numpy(active).to(device)
        w, b, fw, sw, fb, sb = (t[act] for t in (weight, bias, first_w, second_w, first_b, second_b))
        lw, step = decay[act], steps[act]
        for index in range(epoch, epoch + config.epoch_size):
            # each active split's rows in this epoch's order, padded to whole minibatches
            n_batches = -(-n_train[active] // batch)
            span = int(n_batches.max()) * batch
            rows = np.zeros((len(active), span), dtype=np.int64)
            scale = np.zeros((len(active), span), dtype=np.float32)
            for a, s in enumerate(active):
                train, _, holdout = resolved[s]
                order = permutations.epoch(len(splits[s].train), holdout, n_train[s], index)
                rows[a, : n_train[s]] = train[order]
                sizes = np.minimum(batch, n_train[s] - np.arange(0, n_train[s], batch))
                scale[a, : n_train[s]] = np.repeat(1.0 / sizes, sizes)  # mean cross-entropy per minibatch
            live_all = torch.from_numpy(np.arange(int(n_batches.max()))[:, None] < n_batches[None]).to(device)
            rows_t, scale_t = torch.from_numpy(rows).to(device), torch.from_numpy(scale).to(device)
            targets = torch.zeros(len(active), span, n_classes, device=device)
            targets.scatter_(2, labels[rows_t].unsqueeze(2), scale_t.unsqueeze(2))  # scaled one-hot, 0 on padding
            for j in range(int(n_batches.max())):
                cols = slice(j * batch, (j + 1) * batch)
                idx = rows_t[:, cols]
                xb = features.index_select(0, idx.reshape(-1)).view(*idx.shape, dim)  # (A, B, D)
                logits = torch.baddbmm(b, xb, w).view(*idx.shape, n_l2, n_classes)
                # d(mean cross-entropy)/d(logits) = (softmax - one-hot) / minibatch size
                probs = torch.softmax(logits, dim=-1)
                delta = (probs * scale_t[:, cols, None, None] - targets[:, cols, None]).view(*idx.shape, width)
                grad_w = torch.bmm(xb.transpose(1, 2), delta)  # (A, D, R*C)
                grad_b = delta.sum(1, keepdim=True)
                # every split has a minibatch j (host-known): no masking; else the splits past their last keep state
                everyone = j < int(n_batches.min())
                live = live_all[j]
                step = step + 1 if everyone else step + live
                keep = live.view(-1, 1, 1)
                updated = []
                for param, grad, first, second in ((w, grad_w, fw, sw), (b, grad_b, fb, sb)):
                    g = grad + lw * param
                    if adam:  # torch.optim.Adam's single-tensor step (step scalars in float64, then float32)
                        new_first = torch.lerp(first, g, 1 - 0.9)
                        new_second = second * 0.999 + (1 - 0.999) * g * g
                        neg_step_size = (-1e-3 / (1 - 0.9**step)).float().view(-1, 1, 1)
                        correction = torch.sqrt(1 - 0.999**step).float().view(-1, 1, 1)
                        new_param = param + neg_step_size * (new_first / (new_second.sqrt() / correction + 1e-8))
                    else:  # torch.optim.RMSprop's (alpha 0.99, lr 1e-2, no momentum, not centred)
                        new_first = first
                        new_second = second * 0.99 + (1 - 0.99) * g * g
                        new_param = param - 1e-2 * (g / (new_second.sqrt() + 1e-8))
                    # a split past its last minibatch of the epoch keeps its state
                    updated.append((new_param, new_first, new_second) if everyone else tuple(
                        torch.where(keep, new, old) for new, old in
                        ((new_param, param), (new_first, first), (new_second, second))))
                (w, fw, sw), (b, fb, sb) = updated
        epoch += config.epoch_size
        # validation: every active split's models on its validation rows, one read of the counts
        vrows, vmask = valid_rows_t[act], valid_mask[act]
        xv = features.index_select(0, vrows.reshape(-1)).view(*vrows.shape, dim)
        predicted = torch.baddbmm(b, xv, w).view(*vrows.shape, n_l2, n_classes).argmax(-1)
        correct = ((predicted == labels[vrows].unsqueeze(-1)) & vmask.unsqueeze(-1)).sum(1).cpu().numpy()
        improved = np.zeros((len(active), n_l2), dtype=bool)
        still = []
        for a, s in enumerate(active):
            for r in range(n_l2):
                if stopped[s, r]:
                    continue
                if correct[a, r] > best_count[s, r]:
                    best_count[s, r] = correct[a, r]
                    improved[a, r] = True
                elif non_improvements[s, r] >= config.tenacity:
                    stopped[s, r] = True
                else:
                    non_improvements[s, r] += 1
            if not stopped[s].all():
                still.append(s)
        keep_best = torch.from_numpy(np.repeat(improved, n_classes, axis=1)).to(device).unsqueeze(1)
        best_weight[act] = torch.where(keep_best, w, best_weight[act])
        best_bias[act] = torch.where(keep_best, b, best_bias[act])
        weight[act], bias[act], first_w[act], second_w[act], first_b[act], second_b[act] = w, b, fw, sw, fb, sb
        steps[act] = step
        active = np.array(still, dtype=np.int64)
    accuracy = best_count / n_valid[:, None]
    return GridResult(
        accuracy,
        best_weight.view(n_splits, dim, n_l2, n_classes).permute(0, 2, 3, 1).cpu().numpy().copy(),
        best_bias.view(n_splits, n_l2, n_classes).cpu().numpy().copy(),
    )


# ------------------------------------------------------------------------------------------------
# SentEval's validation protocols (tools/validation.py)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProbeResult:
    """Outcome of one classifier protocol.

    Attributes:
        devacc: SentEval's ``devacc`` (the model-selection accuracy), x 100.
        acc: test accuracy x 100.
        penalties: the chosen L2 penalty (per outer fold for nested CV).
        predictions: test predictions (KFold/Split protocols), for F1.
    """

    devacc: float
    acc: float
    penalties: tuple[float, ...]
    predictions: np.ndarray | None = None


def stratified_folds(y: np.ndarray, kfold: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """SentEval's folds: ``StratifiedKFold(kfold, shuffle=True, random_state=seed)`` over ``y``'s order."""
    splitter = StratifiedKFold(n_splits=kfold, shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(y)), y))


def _scan_and_refit(
    x: np.ndarray,
    y: np.ndarray,
    scan: Sequence[DataSplit],
    refits: Sequence[DataSplit],
    choose: Callable[[np.ndarray], list[int]],
    n_classes: int,
    config: ClassifierConfig,
    seed: int,
    batched: bool,
) -> tuple[np.ndarray, list[int], Callable[[int, np.ndarray], np.ndarray]]:
    """A protocol's models: every penalty of :data:`L2_GRID` on the ``scan`` splits, then on each
    ``refits`` split the penalty ``choose`` picks from the scan's accuracies.

    Batched, the refits are trained for every penalty in the same program as the scan (the models
    are independent, so a refit's penalty need not be known when it starts) and the chosen ones are
    kept: one program per task. One at a time, only the chosen refits are trained, after the scan.

    Returns:
        The scan's (S, R) accuracies, the chosen penalty index per refit, and ``predict(refit, x)``.
    """
    if batched:
        grid = _batched_trainer()(x, y, [*scan, *refits], L2_GRID, n_classes, config, seed)
        accuracy = grid.accuracy[: len(scan)]
        chosen = choose(accuracy)
        return accuracy, chosen, lambda refit, features: grid.predict(len(scan) + refit, chosen[refit], features)
    grid = fit_grid_sequential(x, y, scan, L2_GRID, n_classes, config, seed)
    chosen = choose(grid.accuracy)
    penalties = np.array(L2_GRID)[chosen][:, None]
    final = fit_grid_sequential(x, y, refits, penalties, n_classes, config, seed)
    return grid.accuracy, chosen, lambda refit, features: final.predict(refit, 0, features)


def _grid_scores(accuracy: np.ndarray) -> list[float]:
    """SentEval's per-penalty score: ``round(100 * mean over folds, 2)``."""
    return [round(100 * np.mean([float(a) for a in accuracy[:, r]]), 2) for r in range(accuracy.shape[1])]


def _accuracy100(predictions: np.ndarray, y: np.ndarray) -> float:
    return round(100 * float(np.mean(predictions == y)), 2)


def senteval_inner_kfold(
    x: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    config: ClassifierConfig,
    seed: int = SENTEVAL_SEED,
    batched: bool = True,
) -> ProbeResult:
    """SentEval's ``InnerKFoldClassifier`` (MR, CR, SUBJ, MPQA): on each outer fold's training part,
    inner folds pick the penalty; a model with that penalty, early-stopped on a 5% hold-out of the
    training part, is scored on the outer test fold. Both fold loops use ``random_state=1111``
    whatever the seed, as SentEval does."""
    outer = stratified_folds(y, config.kfold, SENTEVAL_SEED)
    scan = [
        DataSplit(train_idx[inner_train], train_idx[inner_test])
        for train_idx, _ in outer
        for inner_train, inner_test in stratified_folds(y[train_idx], config.kfold, SENTEVAL_SEED)
    ]
    per_fold = [slice(fold * config.kfold, (fold + 1) * config.kfold) for fold in range(len(outer))]
    accuracy, best, predict = _scan_and_refit(
        x, y, scan, [DataSplit(train_idx) for train_idx, _ in outer],
        lambda scanned: [int(np.argmax(_grid_scores(scanned[rows]))) for rows in per_fold],
        n_classes, config, seed, batched,
    )
    dev_scores = [np.max(_grid_scores(accuracy[rows])) for rows in per_fold]
    chosen = [L2_GRID[index] for index in best]
    test_scores = [_accuracy100(predict(fold, x[test_idx]), y[test_idx]) for fold, (_, test_idx) in enumerate(outer)]
    return ProbeResult(round(np.mean(dev_scores), 2), round(np.mean(test_scores), 2), tuple(chosen))


def senteval_kfold(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    n_classes: int,
    config: ClassifierConfig,
    seed: int = SENTEVAL_SEED,
    batched: bool = True,
) -> ProbeResult:
    """SentEval's ``KFoldClassifier`` (TREC, MRPC): k folds of train pick the penalty; a model with
    it, early-stopped on a 5% hold-out of train, is scored on test."""
    folds = stratified_folds(y_train, config.kfold, seed)
    accuracy, (best,), predict = _scan_and_refit(
        x_train, y_train, [DataSplit(a, b) for a, b in folds], [DataSplit(np.arange(len(y_train)))],
        lambda scanned: [int(np.argmax(_grid_scores(scanned)))], n_classes, config, seed, batched,
    )
    scores = _grid_scores(accuracy)
    predictions = predict(0, x_test)
    return ProbeResult(np.max(scores), _accuracy100(predictions, y_test), (L2_GRID[best],), predictions)


def senteval_split(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_dev: np.ndarray,
    y_dev: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    n_classes: int,
    config: ClassifierConfig,
    seed: int = SENTEVAL_SEED,
    batched: bool = True,
) -> ProbeResult:
    """SentEval's ``SplitClassifier`` (SST-2): the penalty is picked on dev, early stopping uses dev.

    SentEval then refits the chosen penalty with the same seed, data and stopping rule, which
    rebuilds the scanned model; that model is scored on test here.
    """
    x = np.concatenate([x_train, x_dev])
    y = np.concatenate([y_train, y_dev])
    split = DataSplit(np.arange(len(y_train)), np.arange(len(y_train), len(y)))
    scan = (_batched_trainer() if batched else fit_grid_sequential)(x, y, [split], L2_GRID, n_classes, config, seed)
    scores = [round(100 * float(accuracy), 2) for accuracy in scan.accuracy[0]]
    best = int(np.argmax(scores))
    predictions = scan.predict(0, best, x_test)
    return ProbeResult(np.max(scores), _accuracy100(predictions, y_test), (L2_GRID[best],), predictions)
