"""Compiled kernel of :func:`cl_bench.eval.senteval_classifier.fit_grid` (numba).

Imported lazily, by the first ``fit_grid`` call only: numba and its compilation cache load only when
a transfer task trains its classifiers.

Layout: the models of a data split are the lanes of one weight block ``weight[d, block, lane]``
(model ``r``, class ``c`` is lane ``r * C + c``; lanes are padded to a multiple of 8, one AVX
register, with zero weights that stay zero), row ``D`` is the bias. One thread trains one split's
models through all their epochs: per minibatch, one pass over each feature row computes the logits of
every model (4 rows at a time, each a separate chain of adds in feature order), one more pass adds
its gradient, then the optimiser updates every lane. Float32 throughout, no fast-math (no
reassociation, no fused multiply-add), the optimisers' element formulas those of ``torch.optim``'s
single-tensor Adam and RMSprop.

A stopped model's lanes keep training while another model shares their 8-lane block (that is free:
they share the block's registers) but its validation scores are ignored; its kept (best) copy and
counters never change again, so its result is that of a model frozen at the stop. A block whose
models have all stopped is skipped.
"""

from __future__ import annotations

import os

# The straight-line code below (8 lanes written out) is vectorised by LLVM's SLP pass, which numba
# leaves off by default; it must be on before numba reads its configuration.
os.environ.setdefault("NUMBA_SLP_VECTORIZE", "1")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit, prange, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

numba.config.SLP_VECTORIZE = 1  # in case numba was imported before (read at its first compilation)

#: lanes of one weight block (8 float32 = one AVX register).
LANES = 8
#: minibatch rows whose logits and gradient are computed together (independent chains of adds).
ROWS = 4

#: float32 values per 64-byte cache line.
LINE = 16

_JIT = {"cache": True, "boundscheck": False, "error_model": "numpy", "fastmath": False, "nogil": True}


@intrinsic
def _prefetch(typingctx, array, row, column):  # noqa: ANN001, ANN202 (numba intrinsic signature)
    """Ask the CPU to load the cache line of ``array[row, column]`` (LLVM's ``llvm.prefetch``, read,
    keep in all cache levels). A minibatch's rows are scattered over the feature matrix: on the
    2-core EPYC, the logits pass over 128 rows not in cache took about 2x as long as over cached ones
    (16 MB of MR features); prefetching the next rows overlaps some of that with the arithmetic (the
    gain measured on the busy machine was within its noise, up to ~10% on MR)."""

    def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
        array_type = signature.args[0]
        data = context.make_array(array_type)(context, builder, args[0])
        kinds = signature.args[1:]
        index = [context.cast(builder, value, kind, types.intp) for value, kind in zip(args[1:], kinds, strict=True)]
        pointer = cgutils.get_item_pointer(context, builder, array_type, data, index, wraparound=False)
        byte_pointer, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0"
        )
        builder.call(function, [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(array, row, column), codegen


@njit(**_JIT)
def _prefetch_rows(features: np.ndarray, rows: np.ndarray, start: int, stop: int) -> None:
    """Prefetch every cache line of feature rows ``rows[start:stop]``."""
    dim = features.shape[1]
    for b in range(start, stop):
        for column in range(0, dim, LINE):
            _prefetch(features, rows[b], column)
        _prefetch(features, rows[b], dim - 1)  # a row not aligned to lines ends on one more


@njit(**_JIT)
def _logits(features: np.ndarray, rows: np.ndarray, n_rows: int, weight: np.ndarray, out: np.ndarray,
            blocks_on: np.ndarray) -> None:
    """``out[b, block, lane]`` = logit of lane for feature row ``rows[b]``, ``b < n_rows``: the sum
    over features in order, then the bias; blocks not ``blocks_on`` (all their models stopped) are skipped."""
    dim = features.shape[1]
    _prefetch_rows(features, rows, 0, min(ROWS, n_rows))
    for b in range(0, n_rows, ROWS):
        _prefetch_rows(features, rows, min(b + ROWS, n_rows), min(b + 2 * ROWS, n_rows))  # the next group
        # a short last group repeats its last row (computed, not stored)
        x0 = features[rows[b]]
        x1 = features[rows[min(b + 1, n_rows - 1)]]
        x2 = features[rows[min(b + 2, n_rows - 1)]]
        x3 = features[rows[min(b + 3, n_rows - 1)]]
        for block in range(weight.shape[1]):
            if not blocks_on[block]:
                continue
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0.0)
            b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = np.float32(0.0)
            c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = np.float32(0.0)
            e0 = e1 = e2 = e3 = e4 = e5 = e6 = e7 = np.float32(0.0)
            for d in range(dim):
                w = weight[d, block]
                w0, w1, w2, w3, w4, w5, w6, w7 = w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]
                v = x0[d]
                a0 += v * w0; a1 += v * w1; a2 += v * w2; a3 += v * w3  # noqa: E702
                a4 += v * w4; a5 += v * w5; a6 += v * w6; a7 += v * w7  # noqa: E702
                v = x1[d]
                b0 += v * w0; b1 += v * w1; b2 += v * w2; b3 += v * w3  # noqa: E702
                b4 += v * w4; b5 += v * w5; b6 += v * w6; b7 += v * w7  # noqa: E702
                v = x2[d]
                c0 += v * w0; c1 += v * w1; c2 += v * w2; c3 += v * w3  # noqa: E702
                c4 += v * w4; c5 += v * w5; c6 += v * w6; c7 += v * w7  # noqa: E702
                v = x3[d]
                e0 += v * w0; e1 += v * w1; e2 += v * w2; e3 += v * w3  # noqa: E702
                e4 += v * w4; e5 += v * w5; e6 += v * w6; e7 += v * w7  # noqa: E702
            w = weight[dim, block]
            o = out[b, block]
            o[0] = a0 + w[0]; o[1] = a1 + w[1]; o[2] = a2 + w[2]; o[3] = a3 + w[3]  # noqa: E702
            o[4] = a4 + w[4]; o[5] = a5 + w[5]; o[6] = a6 + w[6]; o[7] = a7 + w[7]  # noqa: E702
            if b + 1 < n_rows:
                o = out[b + 1, block]
                o[0] = b0 + w[0]; o[1] = b1 + w[1]; o[2] = b2 + w[2]; o[3] = b3 + w[3]  # noqa: E702
                o[4] = b4 + w[4]; o[5] = b5 + w[5]; o[6] = b6 + w[6]; o[7] = b7 + w[7]  # noqa: E702
            if b + 2 < n_rows:
                o = out[b + 2, block]
                o[0] = c0 + w[0]; o[1] = c1 + w[1]; o[2] = c2 + w[2]; o[3] = c3 + w[3]  # noqa: E702
                o[4] = c4 + w[4]; o[5] = c5 + w[5]; o[6] = c6 + w[6]; o[7] = c7 + w[7]  # noqa: E702
            if b + 3 < n_rows:
                o = out[b + 3, block]
                o[0] = e0 + w[0]; o[1] = e1 + w[1]; o[2] = e2 + w[2]; o[3] = e3 + w[3]  # noqa: E702
                o[4] = e4 + w[4]; o[5] = e5 + w[5]; o[6] = e6 + w[6]; o[7] = e7 + w[7]  # noqa: E702


@njit(**_JIT)
def _gradient(features: np.ndarray, rows: np.ndarray, n_rows: int, delta: np.ndarray, grad: np.ndarray,
              blocks_on: np.ndarray) -> None:
    """``grad`` = sum over the minibatch's rows, in order, of ``x_b (outer) delta_b`` (bias row: of ``delta_b``);
    0 on blocks not ``blocks_on``."""
    dim = features.shape[1]
    grad[:] = 0.0
    for b in range(0, n_rows, ROWS):
        # a short last group multiplies its missing rows' zero deltas (adding 0.0 changes no sum)
        x0 = features[rows[b]]
        x1 = features[rows[min(b + 1, n_rows - 1)]]
        x2 = features[rows[min(b + 2, n_rows - 1)]]
        x3 = features[rows[min(b + 3, n_rows - 1)]]
        for block in range(grad.shape[1]):
            if not blocks_on[block]:
                continue
            p, q, r, s = delta[b, block], delta[b + 1, block], delta[b + 2, block], delta[b + 3, block]
            p0, p1, p2, p3, p4, p5, p6, p7 = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
            q0, q1, q2, q3, q4, q5, q6, q7 = q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]
            r0, r1, r2, r3, r4, r5, r6, r7 = r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
            s0, s1, s2, s3, s4, s5, s6, s7 = s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
            for d in range(dim):
                g = grad[d, block]
                u, v, y, z = x0[d], x1[d], x2[d], x3[d]
                g[0] = (((g[0] + u * p0) + v * q0) + y * r0) + z * s0
                g[1] = (((g[1] + u * p1) + v * q1) + y * r1) + z * s1
                g[2] = (((g[2] + u * p2) + v * q2) + y * r2) + z * s2
                g[3] = (((g[3] + u * p3) + v * q3) + y * r3) + z * s3
                g[4] = (((g[4] + u * p4) + v * q4) + y * r4) + z * s4
                g[5] = (((g[5] + u * p5) + v * q5) + y * r5) + z * s5
                g[6] = (((g[6] + u * p6) + v * q6) + y * r6) + z * s6
                g[7] = (((g[7] + u * p7) + v * q7) + y * r7) + z * s7
            g = grad[dim, block]
            for lane in range(LANES):
                g[lane] = (((g[lane] + p[lane]) + q[lane]) + r[lane]) + s[lane]


@njit(**_JIT)
def _delta(labels: np.ndarray, rows: np.ndarray, n_rows: int, n_models: int, n_classes: int,
           logits: np.ndarray, delta: np.ndarray) -> None:
    """d(mean cross-entropy)/d(logits) of every model: ``(softmax - one-hot) / n_rows`` per row (as
    torch's log-softmax backward: ``p / n`` off the target, ``p / n - 1 / n`` on it); 0 on padding."""
    inv = np.float32(1.0) / np.float32(n_rows)
    flat_logits = logits.reshape(logits.shape[0], -1)
    flat_delta = delta.reshape(delta.shape[0], -1)
    flat_delta[n_rows:] = 0.0
    for b in range(n_rows):
        z, out, target = flat_logits[b], flat_delta[b], labels[rows[b]]
        for r in range(n_models):
            base = r * n_classes
            top = z[base]
            for c in range(1, n_classes):
                top = max(top, z[base + c])
            total = np.float32(0.0)
            for c in range(n_classes):
                shifted = z[base + c] - top
                # exp(0) is 1 exactly: the top class needs no exp call (half of them for 2 classes)
                out[base + c] = np.float32(1.0) if shifted == 0 else np.exp(shifted)
                total += out[base + c]
            for c in range(n_classes):
                p = out[base + c] / total
                out[base + c] = p * inv - inv if c == target else p * inv


@njit(**_JIT)
def _correct(features: np.ndarray, labels: np.ndarray, rows: np.ndarray, n_models: int, n_classes: int,
             weight: np.ndarray, logits: np.ndarray, rows_buffer: np.ndarray, counts: np.ndarray,
             blocks_on: np.ndarray) -> None:
    """``counts[r]``: rows of ``rows`` model ``r`` classifies right (argmax, first of ties, as torch); the
    counts of a model in a block not ``blocks_on`` are meaningless."""
    counts[:] = 0
    flat = logits.reshape(logits.shape[0], -1)
    size = rows_buffer.shape[0]
    for start in range(0, len(rows), size):
        n = min(size, len(rows) - start)
        rows_buffer[:n] = rows[start:start + n]
        _logits(features, rows_buffer, n, weight, logits, blocks_on)
        for b in range(n):
            target = labels[rows_buffer[b]]
            for r in range(n_models):
                base = r * n_classes
                choice, top = 0, flat[b, base]
                for c in range(1, n_classes):
                    if flat[b, base + c] > top:
                        choice, top = c, flat[b, base + c]
                if choice == target:
                    counts[r] += 1


@njit(**_JIT)
def _mark_blocks(stopped: np.ndarray, n_classes: int, blocks_on: np.ndarray) -> None:
    """``blocks_on[block]``: a model with a lane in the block is still training (a stopped model's lanes
    need no more updates: its result is its kept copy)."""
    blocks_on[:] = False
    for r in range(stopped.shape[0]):
        if not stopped[r]:
            for lane in range(r * n_classes, (r + 1) * n_classes):
                blocks_on[lane // LANES] = True


@njit(**_JIT)
def _train_split(
    features: np.ndarray, labels: np.ndarray, train: np.ndarray, valid: np.ndarray, permutations: np.ndarray,
    first_epoch: int, weight: np.ndarray, first: np.ndarray, second: np.ndarray, best: np.ndarray,
    decay: np.ndarray, best_count: np.ndarray, non_improvements: np.ndarray, stopped: np.ndarray,
    counters: np.ndarray, n_classes: int, batch: int, tenacity: int, epoch_size: int, max_epoch: int,
    adam: bool, constants: np.ndarray,
) -> None:
    """Train one split's models from epoch ``counters[1]`` through the epochs of ``permutations``
    (epoch ``first_epoch + i`` is ``train[permutations[i]]``), SentEval's loop: ``epoch_size``
    epochs, then a validation score per model; a better one keeps a copy; otherwise a model stops
    at its ``tenacity + 1``-th non-improvement. ``counters`` = [optimiser steps, epoch]."""
    n_models = stopped.shape[0]
    blocks = weight.shape[1]
    n_train = len(train)
    eps = np.float32(constants[1])
    rows = np.zeros(batch, np.int32)
    logits = np.zeros((batch + ROWS - 1, blocks, LANES), np.float32)
    delta = np.zeros((batch + ROWS - 1, blocks, LANES), np.float32)
    grad = np.zeros_like(weight)
    counts = np.zeros(n_models, np.int64)
    # a block whose models have all stopped is no longer computed (TREC: 6 classes x 4 models = 3 blocks)
    blocks_on = np.zeros(blocks, np.bool_)
    _mark_blocks(stopped, n_classes, blocks_on)
    # the optimiser runs over the flat arrays (one long loop, vectorised whatever the lanes)
    flat_w, flat_g, flat_m, flat_v = weight.reshape(-1), grad.reshape(-1), first.reshape(-1), second.reshape(-1)
    flat_decay = decay.reshape(-1)
    end_epoch = first_epoch + permutations.shape[0]
    while counters[1] <= max_epoch and counters[1] + epoch_size <= end_epoch:
        for epoch in range(counters[1], counters[1] + epoch_size):
            order = permutations[epoch - first_epoch]
            for start in range(0, n_train, batch):
                n = min(batch, n_train - start)
                for b in range(n):
                    rows[b] = train[order[start + b]]
                _logits(features, rows, n, weight, logits, blocks_on)
                _delta(labels, rows, n, n_models, n_classes, logits, delta)
                _gradient(features, rows, n, delta, grad, blocks_on)
                counters[0] += 1
                if adam:  # torch.optim.Adam, single-tensor step
                    # the step's scalars in float64, as torch computes them in Python, then cast to float32
                    step = float(counters[0])
                    step_size = np.float32(-(constants[0] / (1.0 - constants[2] ** step)))
                    correction = np.float32((1.0 - constants[3] ** step) ** 0.5)
                    beta2, one_minus_beta1 = np.float32(constants[3]), np.float32(constants[4])
                    one_minus_beta2 = np.float32(constants[5])
                    for k in range(len(flat_w)):
                        gk = flat_g[k] + flat_decay[k] * flat_w[k]
                        flat_m[k] = flat_m[k] + one_minus_beta1 * (gk - flat_m[k])
                        flat_v[k] = flat_v[k] * beta2 + one_minus_beta2 * gk * gk
                        flat_w[k] = flat_w[k] + step_size * flat_m[k] / (np.sqrt(flat_v[k]) / correction + eps)
                else:  # torch.optim.RMSprop (no momentum, not centred)
                    alpha, one_minus_alpha = np.float32(constants[2]), np.float32(constants[3])
                    negative_lr = np.float32(-constants[0])
                    for k in range(len(flat_w)):
                        gk = flat_g[k] + flat_decay[k] * flat_w[k]
                        flat_v[k] = flat_v[k] * alpha + one_minus_alpha * gk * gk
                        flat_w[k] = flat_w[k] + negative_lr * gk / (np.sqrt(flat_v[k]) + eps)
        counters[1] += epoch_size
        _correct(features, labels, valid, n_models, n_classes, weight, logits, rows, counts, blocks_on)
        going = 0
        for r in range(n_models):
            if stopped[r]:
                continue
            if counts[r] > best_count[r]:
                best_count[r] = counts[r]
                for d in range(weight.shape[0]):
                    for lane in range(r * n_classes, (r + 1) * n_classes):
                        best[d, lane // LANES, lane % LANES] = weight[d, lane // LANES, lane % LANES]
            elif non_improvements[r] >= tenacity:
                stopped[r] = True
            else:
                non_improvements[r] += 1
            if not stopped[r]:
                going += 1
        if going == 0:
            return
        _mark_blocks(stopped, n_classes, blocks_on)


@njit(parallel=True, **_JIT)
def train_splits(
    features: np.ndarray, labels: np.ndarray, train: np.ndarray, train_offsets: np.ndarray, valid: np.ndarray,
    valid_offsets: np.ndarray, permutations: np.ndarray, stream: np.ndarray, schedule: np.ndarray, first_epoch: int,
    weight: np.ndarray, first: np.ndarray, second: np.ndarray, best: np.ndarray, decay: np.ndarray,
    best_count: np.ndarray, non_improvements: np.ndarray, stopped: np.ndarray, counters: np.ndarray,
    n_classes: int, batch: int, tenacity: int, epoch_size: int, max_epoch: int, adam: bool,
    constants: np.ndarray,
) -> None:
    """:func:`_train_split` for every split still training (``counters[s, 1] == first_epoch`` and a
    model not stopped), one split per thread; split ``s`` trains on ``train[train_offsets[s]:
    train_offsets[s + 1]]`` in the order of ``permutations[stream[s]]`` and scores ``valid``'s rows;
    splits start in the order of ``schedule``."""
    for i in prange(len(schedule)):
        s = schedule[i]
        if counters[s, 1] != first_epoch or stopped[s].all():
            continue
        n_train = train_offsets[s + 1] - train_offsets[s]
        _train_split(
            features, labels, train[train_offsets[s]:train_offsets[s + 1]],
            valid[valid_offsets[s]:valid_offsets[s + 1]], permutations[stream[s], :, :n_train], first_epoch,
            weight[s], first[s], second[s], best[s], decay[s], best_count[s], non_improvements[s], stopped[s],
            counters[s], n_classes, batch, tenacity, epoch_size, max_epoch, adam, constants,
        )
