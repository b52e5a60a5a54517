"""The transfer classifier's previous batched trainer (cl-bench before issue 25), kept only as the
baseline of ``bench_transfer_classifier.py``: it trains one program per call of the protocol (the
k-fold scan, then the refits with the chosen penalties), every data split's models in lock-step on
one torch thread. The code is that of ``cl_bench.eval.senteval_classifier.fit_grid`` at commit
18fedf7, unchanged but for its name.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from cl_bench.eval.senteval_classifier import (
    SENTEVAL_SEED,
    ClassifierConfig,
    DataSplit,
    GridResult,
    _Permutations,
    _resolve,
    initial_linear,
    one_torch_thread,
)


@one_torch_thread()
def fit_grid_per_split(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[DataSplit],
    l2s: Sequence[float] | np.ndarray,
    n_classes: int,
    config: ClassifierConfig,
    seed: int = SENTEVAL_SEED,
) -> GridResult:
    """Train SentEval's model for every (split, L2) pair together; same models as
    :func:`fit_grid_sequential` up to float rounding of the batched matmuls.

    Models of one split see the same minibatches; all splits advance in lock-step through their
    epochs (a split whose epoch has fewer minibatches skips the extra steps). Once every model of a
    split has stopped, the split leaves the batch.

    Args:
        x: (N, D) float32 features.
        y: (N,) labels in ``0 .. n_classes - 1``.
        splits: the data splits (a split's models share data and data order).
        l2s: the L2 penalties tried on every split (R,), or per split (S, R).
        n_classes: number of classes.
        config: SentEval's classifier configuration.
        seed: SentEval's seed.
    """
    l2_table = np.broadcast_to(np.asarray(l2s, dtype=np.float64), (len(splits), np.shape(l2s)[-1]))
    n_splits, n_l2, dim, batch = len(splits), l2_table.shape[1], x.shape[1], config.batch_size
    resolved = [_resolve(split, seed) for split in splits]
    permutations = _Permutations(seed)
    features = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    labels = torch.from_numpy(np.asarray(y)).long()
    init_weight, init_bias = initial_linear(dim, n_classes, seed)
    # Model (s, r) is column block r of weight[s]: logits of a split's minibatch = one bmm.
    weight = init_weight.T.repeat(n_splits, 1, n_l2).contiguous()  # (S, D, R*C)
    bias = init_bias.repeat(n_splits, 1, n_l2).contiguous()  # (S, 1, R*C)
    l2 = torch.tensor(l2_table, dtype=torch.float32).repeat_interleave(n_classes, dim=1)  # (S, R*C)
    first_w, second_w = torch.zeros_like(weight), torch.zeros_like(weight)
    first_b, second_b = torch.zeros_like(bias), torch.zeros_like(bias)
    steps = np.zeros(n_splits, dtype=np.int64)
    l2_w = l2.unsqueeze(1)  # (S, 1, R*C), broadcast over D
    best_accuracy = np.full((n_splits, n_l2), -1.0)
    best_weight = weight.clone()
    best_bias = bias.clone()
    stopped = np.zeros((n_splits, n_l2), dtype=bool)
    non_improvements = np.zeros((n_splits, n_l2), dtype=np.int64)
    n_train = np.array([len(train) for train, _, _ in resolved])
    valid_rows = [torch.from_numpy(valid).long() for _, valid, _ in resolved]
    active = np.arange(n_splits)
    epoch = 0
    while epoch <= config.max_epoch and len(active):
        for index in range(epoch, epoch + config.epoch_size):
            # Each active split's rows in this epoch's order, padded to whole minibatches.
            n_batches = -(-n_train[active] // batch)
            width = int(n_batches.max()) * batch
            rows = np.zeros((len(active), width), dtype=np.int64)
            weights = np.zeros((len(active), width), dtype=np.float32)
            for a, s in enumerate(active):
                train, _, holdout = resolved[s]
                order = permutations.epoch(len(splits[s].train), holdout, n_train[s], index)
                rows[a, : n_train[s]] = train[order]
                # mean cross-entropy over each minibatch (the last one may be short)
                sizes = np.minimum(batch, n_train[s] - np.arange(0, n_train[s], batch))
                weights[a, : n_train[s]] = np.repeat(1.0 / sizes, sizes)
            rows_t, weights_t = torch.from_numpy(rows), torch.from_numpy(weights)
            # one-hot labels scaled by the minibatch weights (zero on padding)
            targets = torch.zeros(len(active), width, n_classes)
            targets.scatter_(2, labels[rows_t].unsqueeze(2), weights_t.unsqueeze(2))
            act = torch.from_numpy(active)
            w, b = weight[act], bias[act]
            fw, sw, fb, sb = first_w[act], second_w[act], first_b[act], second_b[act]
            lw = l2_w[act]
            for j in range(int(n_batches.max())):
                live = np.flatnonzero(n_batches > j)
                every = len(live) == len(active)
                sel = slice(None) if every else torch.from_numpy(live)
                idx = rows_t[sel, j * batch : (j + 1) * batch]
                xb = features.index_select(0, idx.reshape(-1)).view(*idx.shape, dim)  # (A, B, D)
                logits = torch.baddbmm(b[sel], xb, w[sel]).view(*idx.shape, n_l2, n_classes)
                # d(mean cross-entropy)/d(logits) = (softmax - one-hot) / minibatch size
                logits = (logits - logits.amax(-1, keepdim=True)).exp_()
                probs = logits.div_(logits.sum(-1, keepdim=True))
                cols = slice(j * batch, (j + 1) * batch)
                delta = probs.mul_(weights_t[sel, cols, None, None]).sub_(targets[sel, cols, None]).view(*idx.shape, -1)
                grad_w = torch.bmm(xb.transpose(1, 2), delta)  # (A, D, R*C)
                grad_b = delta.sum(1, keepdim=True)
                steps[active[live]] += 1
                step = steps[active[live]]
                for param, grad, first, second, decay in (
                    (w, grad_w, fw, sw, lw),
                    (b, grad_b, fb, sb, lw),
                ):
                    p, f, q = (param, first, second) if every else (param[sel], first[sel], second[sel])
                    g = grad + decay[sel] * p
                    if config.optim == "adam":  # torch.optim.Adam's single-tensor step
                        f.lerp_(g, 1 - 0.9)
                        q.mul_(0.999).addcmul_(g, g, value=1 - 0.999)
                        neg_step_size = torch.from_numpy(-1e-3 / (1 - 0.9**step)).float().view(-1, 1, 1)
                        correction = torch.from_numpy((1 - 0.999**step) ** 0.5).float().view(-1, 1, 1)
                        # addcdiv_(f, denom, value=-step_size) with a step size per model
                        p.add_(neg_step_size * f / (q.sqrt() / correction).add_(1e-8))
                    else:  # torch.optim.RMSprop's (alpha 0.99, lr 1e-2, no momentum)
                        q.mul_(0.99).addcmul_(g, g, value=1 - 0.99)
                        p.addcdiv_(g, q.sqrt().add_(1e-8), value=-1e-2)
                    if not every:
                        param[sel], first[sel], second[sel] = p, f, q
            weight[act], bias[act] = w, b
            first_w[act], second_w[act], first_b[act], second_b[act] = fw, sw, fb, sb
        epoch += config.epoch_size
        still = []
        for s in active:
            with torch.no_grad():
                logits = features[valid_rows[s]] @ weight[s] + bias[s]
            predicted = logits.view(-1, n_l2, n_classes).argmax(-1)
            correct = (predicted == labels[valid_rows[s], None]).sum(0).numpy()
            accuracy = correct / len(valid_rows[s])
            for r in range(n_l2):
                if stopped[s, r]:
                    continue
                if accuracy[r] > best_accuracy[s, r]:
                    best_accuracy[s, r] = accuracy[r]
                    cols = slice(r * n_classes, (r + 1) * n_classes)
                    best_weight[s, :, cols] = weight[s, :, cols]
                    best_bias[s, :, cols] = bias[s, :, cols]
                elif non_improvements[s, r] >= config.tenacity:
                    stopped[s, r] = True
                else:
                    non_improvements[s, r] += 1
            if not stopped[s].all():
                still.append(s)
        active = np.array(still, dtype=np.int64)
    return GridResult(
        best_accuracy,
        best_weight.view(n_splits, dim, n_l2, n_classes).permute(0, 2, 3, 1).numpy().copy(),
        best_bias.view(n_splits, n_l2, n_classes).numpy().copy(),
    )
