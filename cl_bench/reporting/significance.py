"""Is encoder A better than encoder B beyond noise? Two tests, both with scipy's implementations.

* **Test-set noise, paired bootstrap** (:func:`paired_bootstrap`): the same STS test pairs were scored
  by both encoders; ``scipy.stats.bootstrap(..., paired=True)`` resamples pairs (each pair keeps its
  gold score and both encoders' similarities, and its sub-dataset), and on every resample each task's
  figure is recomputed with SentEval's aggregation (:func:`cl_bench.eval.pair_scores.task_figure`, ``all`` for
  STS12–16) and the average over the tasks. The interval is the bootstrap's percentile interval of
  A − B (``method`` picks another of scipy's). With several seeds on a side, a side's figure is the
  mean of its seeds' figures on the same resampled pairs. The statistic is vectorised over a batch of
  resamples (:class:`_ResampledSpearman`: a resample is a count per pair, and a Spearman on it the
  count-weighted Pearson of the average ranks, exactly what ranking the resampled arrays gives), so
  scipy draws the very resamples it drew when the statistic was computed one resample at a time.
* **Seed noise, Welch's t-test** (:func:`seed_test`): ``scipy.stats.ttest_ind(equal_var=False)`` on
  the per-seed figures of the two sides (needs two seeds or more on each side).

The paired bootstrap says whether a difference survives resampling the test set for these exact
weights; Welch's test whether it survives retraining with other seeds. A reviewer wants both.

Every test gives a two-sided p-value: Welch's from scipy; the bootstrap's from its resampled differences
(:func:`bootstrap_p`, the p at which the percentile interval would just touch 0). Several tasks, or
several sweep points, looked at together are one family: :func:`holm` adjusts their p-values (Holm's
step-down, which controls the family-wise error rate), and the marks (``*`` adjusted p < 0.05,
``**`` < 0.01) use the adjusted p. Replicates without any variance get no Welch test ("no test (zero
variance)"): t is undefined there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd

from cl_bench.eval.pair_scores import PairScores, task_figure
from cl_bench.eval.registry import average_members
from cl_bench.reporting.report_args import DEFAULT_RESAMPLES

AVERAGE = "avg"
#: the resampling's default random seed (recorded with every interval)
DEFAULT_SEED = 0
ZERO_VARIANCE = "no test (zero variance)"


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (NaNs are not tested: they stay NaN and do not
    count in the family size).

    The i-th smallest of m p-values becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting where the
    adjusted p < alpha controls the family-wise error rate at alpha.
    """
    values = np.asarray(pvalues, dtype=float)
    adjusted = np.full(values.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(values))
    order = tested[np.argsort(values[tested], kind="stable")]  # ascending p; rank r scaled by (m - r)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate((len(order) - np.arange(len(order))) * values[order]))
    return adjusted


def bootstrap_p(differences: np.ndarray) -> float:
    """Two-sided p-value of "no difference" from a bootstrap distribution of A − B: twice the smaller share
    of resamples on either side of 0, each count plus one over resamples plus one (so that p is never 0
    from finitely many resamples), at most 1. It is the level at which the percentile interval would
    just reach 0: the interval excludes 0 at 95% exactly when p < 0.05 (up to the +1)."""
    finite = np.asarray(differences, dtype=float)
    finite = finite[~np.isnan(finite)]
    if not len(finite):
        return math.nan
    below, above = int((finite <= 0).sum()), int((finite >= 0).sum())
    return min(1.0, 2.0 * (min(below, above) + 1) / (len(finite) + 1))


def endpoint_mc_error(differences: np.ndarray, confidence: float = 0.95, batches: int = 20) -> float:
    """Monte-Carlo standard error of the percentile interval's endpoints (the larger of the two), by batch
    means: the endpoints computed on ``batches`` equal slices of the resamples vary by sqrt(batches) times
    the full-sample error. It says how many decimals of an endpoint are not resampling noise."""
    values = np.asarray(differences, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) < 2 * batches:
        return math.nan
    tail = (1 - confidence) / 2
    slices = np.array_split(values, batches)
    lows = [np.quantile(x, tail) for x in slices]
    highs = [np.quantile(x, 1 - tail) for x in slices]
    return float(max(np.std(lows, ddof=1), np.std(highs, ddof=1)) / math.sqrt(batches))


def decimals_for(error: float, most: int = 2) -> int:
    """Decimals to print a figure with a Monte-Carlo error ``error``: the last digit shown is not below it."""
    if math.isnan(error) or error <= 0:
        return most
    return int(max(0, min(most, math.floor(-math.log10(error)))))


@dataclass
class _Flat:
    """All pairs of all compared tasks, one row each: the arrays ``scipy.stats.bootstrap`` resamples."""

    tasks: list[str]
    parts: list[list[str]]  # per task, its parts (sub-datasets / the test split)
    group: np.ndarray  # per pair: index of (task, part) in ``keys``
    keys: list[tuple[int, int]]  # (task index, part index)
    gold: np.ndarray
    a: list[np.ndarray]  # per seed of side A: each pair's similarity
    b: list[np.ndarray]


def common_tasks(a: Sequence[PairScores], b: Sequence[PairScores], tasks: Sequence[str] | None = None) -> list[str]:
    """The tasks every run of both sides scored (in the first run's order): ``tasks`` if given, else those
    of ``sts_avg`` (the seven STS test figures; dev splits such as ``stsb_dev`` only when named), else all."""
    names = [t for t in a[0] if all(t in s for s in (*a, *b))]
    if tasks is None:
        members = [t for t in names if t in average_members().get("sts_avg", [])]
        return members or names
    return [t for t in names if t in tasks]


def _flatten(a: Sequence[PairScores], b: Sequence[PairScores], tasks: Sequence[str]) -> _Flat:
    if not a or not b:
        raise ValueError("each side needs at least one run's pair scores")
    parts, keys, group, gold = [], [], [], []
    systems: list[list[np.ndarray]] = [[] for _ in (*a, *b)]  # side A's runs, then side B's
    for t, task in enumerate(tasks):
        names = list(a[0][task])
        parts.append(names)
        for p, part in enumerate(names):
            reference = a[0][task][part][1]
            for side in (*a, *b):
                if part not in side[task] or not np.array_equal(side[task][part][1], reference):
                    raise ValueError(f"{task}/{part}: the runs did not score the same pairs (gold scores differ)")
            keys.append((t, p))
            group.append(np.full(len(reference), len(keys) - 1))
            gold.append(reference)
            for i, side in enumerate((*a, *b)):
                systems[i].append(side[task][part][0])
    joined = [np.concatenate(x) for x in systems]
    return _Flat(list(tasks), parts, np.concatenate(group), keys, np.concatenate(gold),
                 joined[: len(a)], joined[len(a) :])


def _centred_ranks(values: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    ranks = rankdata(values)  # average ranks for ties, as scipy.stats.spearmanr
    return ranks - ranks.mean()


def _figures(flat: _Flat, group: np.ndarray, gold: np.ndarray, systems: Sequence[np.ndarray],
             aggregation: str) -> np.ndarray:
    """Per task, the mean over ``systems`` (seeds) of the task's aggregated figure on these pairs, one set of
    pairs at a time: the full test set's figures, and the reference :class:`_ResampledSpearman` is tested against."""
    out = np.empty(len(flat.tasks))
    if aggregation == "all":
        # SentEval's "all": the Spearman of the task's pooled pairs; the gold ranks serve every system
        task_of = np.array([t for t, _ in flat.keys])[group.astype(np.intp)]
        for t in range(len(flat.tasks)):
            mask = task_of == t
            ranks_g = _centred_ranks(gold[mask])
            values = []
            for system in systems:
                ranks_s = _centred_ranks(system[mask])
                denominator = np.sqrt((ranks_s @ ranks_s) * (ranks_g @ ranks_g))
                values.append(float((ranks_s @ ranks_g) / denominator * 100.0) if denominator > 0 else math.nan)
            out[t] = float(np.mean(values))
        return out
    masks = [group == k for k in range(len(flat.keys))]
    for t in range(len(flat.tasks)):
        mine = [(p, masks[k]) for k, (tt, p) in enumerate(flat.keys) if tt == t]
        gold_parts = {flat.parts[t][p]: gold[m] for p, m in mine}
        values = [task_figure({flat.parts[t][p]: s[m] for p, m in mine}, gold_parts, aggregation) for s in systems]
        out[t] = float(np.mean(values))
    return out


class _TieGroups:
    """A column of values sorted once: its order and its runs of equal values, from which a resample's average
    ranks follow by counting (no sort per resample)."""

    def __init__(self, values: np.ndarray) -> None:
        self.order = np.argsort(values, kind="stable")
        ordered = values[self.order]
        starts_group = np.concatenate(([True], ordered[1:] != ordered[:-1]))
        self.starts = np.flatnonzero(starts_group)  # where each run of equal values begins in sorted order
        self.sizes = np.diff(np.append(self.starts, len(values)))
        self.ties = len(self.starts) < len(values)

    def run_counts(self, sorted_counts: np.ndarray) -> np.ndarray:
        """Per resample (column), the drawn pairs of each run of equal values (a row each); ``sorted_counts``
        holds how many times each pair (row, in this column's sorted order) was drawn."""
        return np.add.reduceat(sorted_counts, self.starts, axis=0) if self.ties else sorted_counts

    def per_pair(self, per_run: np.ndarray) -> np.ndarray:
        """A row per run of equal values repeated for each pair of the run (sorted order)."""
        return np.repeat(per_run, self.sizes, axis=0) if self.ties else per_run


def _doubled_centred_ranks(run_counts: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Twice the average rank minus twice the mean rank of each run of equal values (row), per resample
    (column): ``run_counts`` the drawn pairs of each run in sorted order, ``drawn`` the columns' totals. A
    value's average rank (as ``scipy.stats.rankdata`` gives it) is the number of drawn pairs of lower values
    plus (its own drawn pairs + 1) / 2 and the mean rank (drawn + 1) / 2; doubled, both are integers, so that
    the sums of their products are exact."""
    return 2.0 * np.cumsum(run_counts, axis=0) - run_counts - drawn


class _SliceRanks:
    """The pairs of one slice (a task, or a part of one) in the order of their gold scores, and each system's
    order among them: what :class:`_ResampledSpearman` needs to rank a resample of the slice."""

    def __init__(self, part: slice, gold: np.ndarray, systems: Sequence[np.ndarray]) -> None:
        self.gold = _TieGroups(gold[part])
        self.pairs = part.start + self.gold.order  # the slice's pairs (rows of the counts), in gold order
        self.systems = [_TieGroups(system[part][self.gold.order]) for system in systems]

    def spearmans(self, counts: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Per system, the Spearman x 100 of the drawn pairs in every resample (a column of ``counts``, pairs x
        resamples), and the resamples' numbers of drawn pairs. NaN where fewer than two pairs were drawn or a
        side is constant."""
        weights = counts[self.pairs]
        drawn = weights.sum(axis=0)
        gold_runs = self.gold.run_counts(weights)
        gold_values = _doubled_centred_ranks(gold_runs, drawn)
        gold_spread = (gold_runs * gold_values * gold_values).sum(axis=0)
        gold = self.gold.per_pair(gold_values)
        out = []
        for system in self.systems:
            mine = weights[system.order]
            ranks = system.per_pair(_doubled_centred_ranks(system.run_counts(mine), drawn))
            weighted = mine * ranks
            spread = (weighted * ranks).sum(axis=0)
            denominator = np.sqrt(spread * gold_spread)
            with np.errstate(invalid="ignore", divide="ignore"):
                value = (weighted * gold[system.order]).sum(axis=0) / denominator * 100.0
            value[(drawn < 2) | ~(denominator > 0)] = np.nan
            out.append(value)
        return out, drawn


class _ResampledSpearman:
    """The paired bootstrap's statistic, vectorised over a batch of resamples: per task A − B (each side the
    mean over its seeds of the task's aggregated Spearman x 100) and, last, their mean over the tasks.

    A resample is a row of pair indices; what a Spearman of its pairs depends on is how many times each pair
    was drawn, so each batch becomes a count matrix and every Spearman the count-weighted Pearson correlation of
    the average ranks (:func:`_doubled_centred_ranks`). That is what ranking the resampled arrays
    gives (:func:`_figures`; equal in tests/reporting/test_significance.py), NaN where a slice has fewer than two drawn
    pairs or a constant side, as :func:`cl_bench.eval.pair_scores.spearman100`.
    """

    def __init__(self, flat: _Flat, aggregation: str) -> None:
        if aggregation not in ("all", "mean", "wmean"):
            raise ValueError(f"aggregation: {aggregation!r} is not one of all, mean, wmean")
        self.aggregation = aggregation
        self.n_pairs = len(flat.gold)
        self.n_a = len(flat.a)
        self.n_systems = len(flat.a) + len(flat.b)
        # the flattened pairs are contiguous per (task, part) in the order of ``flat.keys``: slices of the pairs
        ends = np.cumsum(np.bincount(flat.group.astype(np.intp), minlength=len(flat.keys)))
        part_slices = [slice(int(end - size), int(end))
                       for end, size in zip(ends, np.diff(ends, prepend=0), strict=True)]
        self.slices: list[list[_SliceRanks | None]] = []  # per task, the slices it aggregates (None: no pairs)
        for t in range(len(flat.tasks)):
            mine = [part for part, (owner, _) in zip(part_slices, flat.keys, strict=True) if owner == t]
            if not mine:  # a task without parts has no figure
                mine = [slice(0, 0)]
            elif aggregation == "all":
                mine = [slice(mine[0].start, mine[-1].stop)]
            self.slices.append([_SliceRanks(part, flat.gold, [*flat.a, *flat.b]) if part.stop > part.start else None
                                for part in mine])

    def counts(self, indices: np.ndarray) -> np.ndarray:
        """How many times each pair was drawn (a row per pair, float) in each resample (a column; a row of
        ``indices``): pairs along the first axis, so that the sorts' gathers copy whole rows and the rank
        cumulative sums run down contiguous rows."""
        out = np.empty((indices.shape[0], self.n_pairs))
        for row, drawn in enumerate(indices):  # one bincount a resample: its counts stay in cache
            out[row] = np.bincount(drawn, minlength=self.n_pairs)
        return np.ascontiguousarray(out.T)

    def _task(self, counts: np.ndarray, slices: list[_SliceRanks | None]) -> list[np.ndarray]:
        """Per system, the task's aggregated figure in every resample."""
        empty = np.full(counts.shape[1], np.nan), np.zeros(counts.shape[1])
        results = [s.spearmans(counts) if s is not None else ([empty[0]] * self.n_systems, empty[1]) for s in slices]
        if len(results) == 1 or self.aggregation == "mean":
            return [np.mean(np.stack(values), axis=0) for values in zip(*(r[0] for r in results), strict=True)]
        sizes = np.stack([r[1] for r in results])  # "wmean": weighted by the parts' drawn pairs
        with np.errstate(invalid="ignore", divide="ignore"):
            return [(np.stack(values) * sizes).sum(axis=0) / sizes.sum(axis=0)
                    for values in zip(*(r[0] for r in results), strict=True)]

    def __call__(self, indices: np.ndarray, axis: int = -1) -> np.ndarray:
        """``scipy.stats.bootstrap``'s vectorised statistic on resampled pair indices (one resample, 1-D, or a
        batch, rows x pairs): (tasks + 1) values per resample, the resamples on the last axis."""
        if axis not in (-1, indices.ndim - 1):
            raise ValueError("the pair indices are resampled along the last axis")
        batch = np.atleast_2d(indices)
        counts = self.counts(batch.reshape(-1, batch.shape[-1]))
        out = np.empty((len(self.slices) + 1, counts.shape[1]))
        for t, slices in enumerate(self.slices):
            figures = self._task(counts, slices)
            out[t] = np.mean(figures[:self.n_a], axis=0) - np.mean(figures[self.n_a:], axis=0)
        out[-1] = out[:-1].mean(axis=0)
        return out.reshape(out.shape[0], *batch.shape[:-1]) if indices.ndim > 1 else out[:, 0]


#: resamples per batch of the vectorised statistic: its count and rank matrices are a few batch x pairs
#: float64 arrays (~40 MB each at 250 x 19,000 pairs)
BOOTSTRAP_BATCH = 250


class BootstrapOptions(TypedDict, total=False):
    """How :func:`paired_bootstrap` resamples (its keyword arguments; :func:`compare` passes them on)."""

    n_resamples: int
    confidence: float
    method: str
    seed: int
    aggregation: str


def paired_bootstrap(
    a: Sequence[PairScores],
    b: Sequence[PairScores],
    tasks: Sequence[str] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int = DEFAULT_SEED,
    aggregation: str = "all",
) -> pd.DataFrame:
    """A − B per task and for their average, with a paired-bootstrap confidence interval and p-value.

    Args:
        a: side A's runs (one per seed), each ``{task: {part: (similarities, gold)}}``
            (:func:`cl_bench.eval.pair_scores.load_pair_scores`).
        b: side B's runs, scored on the same pairs.
        tasks: the tasks to compare (default: every task all runs have).
        n_resamples: bootstrap resamples.
        confidence: the interval's level.
        method: ``scipy.stats.bootstrap``'s ``percentile`` | ``basic`` | ``BCa``.
        seed: the resampling's random seed.
        aggregation: SentEval's aggregation of sub-datasets (``all`` | ``mean`` | ``wmean``).

    Returns:
        One row per task and a last row ``avg`` (their mean): ``task, a, b, difference, ci_low, ci_high,
        ci_mc_error, p, pairs, resamples, resample_seed``; ``a``/``b`` are the figures on the full test set
        (mean over seeds), ``p`` the two-sided bootstrap p (:func:`bootstrap_p`), ``ci_mc_error`` the
        endpoints' Monte-Carlo error (:func:`endpoint_mc_error`).

    Raises:
        ValueError: no common task, or the runs scored different pairs.
    """
    from scipy.stats import bootstrap

    names = common_tasks(a, b, tasks)
    if not names:
        raise ValueError("the two sides have no STS task in common (no pair scores?)")
    flat = _flatten(a, b, names)
    statistic = _ResampledSpearman(flat, aggregation)
    full_a = _figures(flat, flat.group, flat.gold, flat.a, aggregation)
    full_b = _figures(flat, flat.group, flat.gold, flat.b, aggregation)
    # paired: scipy resamples the pair indices (as it does for paired samples) and the statistic reads the pairs
    result = bootstrap((np.arange(len(flat.gold)),), statistic, paired=True, vectorized=True,
                       n_resamples=n_resamples, batch=BOOTSTRAP_BATCH, confidence_level=confidence, method=method,
                       rng=np.random.default_rng(seed))
    low, high = np.atleast_1d(result.confidence_interval.low), np.atleast_1d(result.confidence_interval.high)
    distribution = np.atleast_2d(result.bootstrap_distribution)
    rows = []
    sizes = [int(sum((flat.group == k).sum() for k, (t, _) in enumerate(flat.keys) if t == i)) for i in range(len(names))]
    for i, task in enumerate([*names, AVERAGE]):
        fa = float(full_a[i]) if i < len(names) else float(full_a.mean())
        fb = float(full_b[i]) if i < len(names) else float(full_b.mean())
        rows.append({"task": task, "a": fa, "b": fb, "difference": fa - fb,
                     "ci_low": float(low[i]), "ci_high": float(high[i]),
                     "ci_mc_error": endpoint_mc_error(distribution[i], confidence) if method == "percentile" else math.nan,
                     "p": bootstrap_p(distribution[i]),
                     "pairs": sizes[i] if i < len(names) else int(sum(sizes)),
                     "resamples": n_resamples, "resample_seed": seed})
    return pd.DataFrame(rows)


def seed_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's t-test (``scipy.stats.ttest_ind(equal_var=False)``) of per-seed figures: (t, two-sided p).

    NaNs when a side has fewer than two seeds, and when neither side has any seed variance (t is
    undefined there: :func:`welch_reason` says so).
    """
    _, _, result = _welch_result(a, b)
    return (math.nan, math.nan) if result is None else (float(result.statistic), float(result.pvalue))


def welch_reason(a: Sequence[float], b: Sequence[float]) -> str:
    """Why :func:`seed_test` gives no p: ``one seed`` or :data:`ZERO_VARIANCE`; empty when it gives one."""
    a_, b_, result = _welch_result(a, b)
    return "" if result is not None else "one seed" if len(a_) < 2 or len(b_) < 2 else ZERO_VARIANCE


def _welch_result(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], list[float], Any]:
    """The two sides without NaNs and ``scipy.stats.ttest_ind(equal_var=False)`` on them (None where it is
    undefined: fewer than two seeds a side, or no seed variance on either side)."""
    from scipy.stats import ttest_ind

    a_, b_ = [v for v in a if not math.isnan(v)], [v for v in b if not math.isnan(v)]
    if len(a_) < 2 or len(b_) < 2 or (np.ptp(a_) == 0 and np.ptp(b_) == 0):
        return a_, b_, None
    return a_, b_, ttest_ind(a_, b_, equal_var=False)


def per_seed_figures(runs: Sequence[PairScores], tasks: Sequence[str], aggregation: str = "all") -> pd.DataFrame:
    """Each run's figure per task and their average (one row per run), recomputed from its pair scores."""
    rows = []
    for scores in runs:
        row = {t: task_figure({p: s for p, (s, _) in scores[t].items()}, {p: g for p, (_, g) in scores[t].items()},
                              aggregation) for t in tasks}
        row[AVERAGE] = float(np.mean([row[t] for t in tasks]))
        rows.append(row)
    return pd.DataFrame(rows)


def compare(
    a: Sequence[PairScores],
    b: Sequence[PairScores],
    tasks: Sequence[str] | None = None,
    **options: Unpack[BootstrapOptions],
) -> pd.DataFrame:
    """:func:`paired_bootstrap`'s table plus, per row, Welch's test over seeds (``welch_t``, ``welch_p``;
    NaN unless both sides have two seeds or more and some seed variance: ``welch_note`` says why not),
    Holm's adjustment of each test over the table's rows (``p_holm``, ``welch_p_holm``: the family is the
    distinct tests, the tasks and, with more than one task, their average; with one task the average is that
    task's figure again, so its row is left out) and the seed counts ``n_a``, ``n_b``.

    ``options`` are :func:`paired_bootstrap`'s (its defaults); the per-seed figures Welch's test
    compares use the same ``aggregation``.
    """
    table = paired_bootstrap(a, b, tasks, **options)
    if (table["task"] != AVERAGE).sum() == 1:  # the average of one task is the same test again: not a 2nd member
        table = table[table["task"] != AVERAGE].reset_index(drop=True)
    names = [t for t in table["task"] if t != AVERAGE]
    aggregation = options.get("aggregation", "all")
    seeds_a, seeds_b = per_seed_figures(a, names, aggregation), per_seed_figures(b, names, aggregation)
    tests = [seed_test(list(seeds_a[t]), list(seeds_b[t])) for t in table["task"]]
    notes = [welch_reason(list(seeds_a[t]), list(seeds_b[t])) for t in table["task"]]
    welch_p = [p for _, p in tests]
    return table.assign(n_a=len(a), n_b=len(b), welch_t=[t for t, _ in tests], welch_p=welch_p, welch_note=notes,
                        p_holm=holm(table["p"]), welch_p_holm=holm(welch_p))


def stars(p: float) -> str:
    """``**`` below 0.01, ``*`` below 0.05, else nothing (NaN: no test, no mark)."""
    if math.isnan(p):
        return ""
    return "**" if p < 0.01 else "*" if p < 0.05 else ""


def split_of(task: str) -> str:
    """The split a compared task's pairs come from: ``dev`` for ``<task>_dev``, else ``test``."""
    return "dev" if task.endswith("_dev") else "test"


#: the evaluation settings ``--compare`` holds the sides to (a field of the runs' provenance, or the sample): name
#: -> how a warning calls it
EVAL_SETTINGS: dict[str, str] = {
    "sample": "sample (eval.sample_pairs)", "eval_truncate_dim": "truncation (eval.truncate_dim)",
    "eval_postprocess": "post-processing (eval.postprocess)", "eval_pooler": "pooler (eval.pooler)",
    "eval_precision": "precision (eval.precision)", "eval_backend": "backend (eval.backend)",
}
#: a side's seeds below which ``--compare`` warns (docs/compare.md asks for three or more)
MIN_SEEDS = 3
FULL = "full"


def side_protocol(settings: Sequence[dict[str, str]] | None) -> str:
    """What a side's figures were computed on: ``full protocol``, ``sample of 300 pairs`` (``a | b`` when its runs
    differ; ``protocol not recorded`` without settings)."""
    if not settings:
        return "protocol not recorded"
    seen = list(dict.fromkeys(str(s.get("sample", FULL)) for s in settings))
    return " | ".join("full protocol" if v == FULL else f"sample of {v} pairs" for v in seen)


def markdown_compare(table: pd.DataFrame, label_a: str, label_b: str, confidence: float = 0.95,
                     settings_a: Sequence[dict[str, str]] | None = None,
                     settings_b: Sequence[dict[str, str]] | None = None) -> str:
    """The comparison as markdown: per task its split and the pairs it was computed on, A and B (each headed by
    its seeds n and protocol, full or a sample), A − B, the paired-bootstrap CI of that difference (the pairs'
    noise only), its p and Holm-adjusted p with the mark, and, with two seeds or more a side, Welch's p over
    seeds, Holm-adjusted, with its mark: every interval and p on the row of the difference it tests. Figures
    are rounded to the endpoints' Monte-Carlo error."""
    level = f"{confidence * 100:g}%"
    error = float(np.nanmax(table["ci_mc_error"])) if "ci_mc_error" in table and table["ci_mc_error"].notna().any() \
        else math.nan
    digits = decimals_for(error)
    seeds = table["welch_p"].notna().any() or (table["welch_note"] == ZERO_VARIANCE).any()

    def pvalue(p: float) -> str:
        return "—" if math.isnan(p) else f"{p:.2g}" if p >= 0.001 else "<0.001"

    shown = pd.DataFrame({
        "task": table["task"],
        "split": [split_of(t) if t != AVERAGE else " + ".join(sorted({split_of(n) for n in table["task"] if n != AVERAGE}))
                  for t in table["task"]],
        "pairs": [str(int(n)) for n in table["pairs"]] if "pairs" in table else ["—"] * len(table),
        f"A: {label_a} (seeds n={table['n_a'].iloc[0]}; {side_protocol(settings_a)})":
            [f"{v:.{digits}f}" for v in table["a"]],
        f"B: {label_b} (seeds n={table['n_b'].iloc[0]}; {side_protocol(settings_b)})":
            [f"{v:.{digits}f}" for v in table["b"]],
        "A − B": [f"{v:+.{digits}f}" for v in table["difference"]],
        f"{level} CI of A − B (paired bootstrap, these pairs)": [
            f"[{lo:+.{digits}f}, {hi:+.{digits}f}]" for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)],
        "p (bootstrap)": [pvalue(p) for p in table["p"]],
        "Holm p, mark (bootstrap)": [f"{pvalue(p)} {stars(p)}".strip() for p in table["p_holm"]],
    })
    if seeds:
        shown["Welch p (seeds)"] = [pvalue(p) if not math.isnan(p) else (note or "—")
                                    for p, note in zip(table["welch_p"], table["welch_note"], strict=True)]
        shown["Holm p, mark (seeds)"] = [f"{pvalue(p)} {stars(p)}".strip() if not math.isnan(p) else "no mark"
                                         for p in table["welch_p_holm"]]
    return shown.to_markdown(index=False, colalign=("left", *["right"] * (len(shown.columns) - 1)), disable_numparse=True)


def holm_family(table: pd.DataFrame) -> str:
    """The line that says which distinct tests Holm's correction counts (printed once, under the table)."""
    tasks = [t for t in table["task"] if t != AVERAGE]
    members = f"{len(tasks)} task(s)" + (" and their average" if AVERAGE in set(table["task"]) else "")
    return (f"Holm family: {len(table)} distinct test(s) per test kind ({members}: {', '.join(map(str, table['task']))}); "
            "marks use the Holm-adjusted p (`*` < 0.05, `**` < 0.01).")


def compare_notes(table: pd.DataFrame, label_a: str, label_b: str,
                  settings_a: Sequence[dict[str, str]] | None = None,
                  settings_b: Sequence[dict[str, str]] | None = None) -> list[str]:
    """How the table was computed (resamples, seed, Monte-Carlo error, the Holm family, once) and the warnings,
    each when and only when its condition holds: a side computed on a sample (its figures are not the protocol's),
    a side with fewer than :data:`MIN_SEEDS` seeds (seed variance is not in the interval), the sides differing in
    an evaluation setting (:data:`EVAL_SETTINGS`, from ``settings_a``/``settings_b``: one dict per run), and
    zero-variance replicates."""
    resamples = int(table["resamples"].iloc[0]) if "resamples" in table else 0
    seed = table["resample_seed"].iloc[0] if "resample_seed" in table else "?"
    error = float(np.nanmax(table["ci_mc_error"])) if table["ci_mc_error"].notna().any() else math.nan
    lines = [
        f"Paired bootstrap over the compared pairs (the pairs column): {resamples} resamples, resampling seed {seed}"
        + (f"; Monte-Carlo error of the interval endpoints ≤ {error:.3f} (figures rounded to it)" if not math.isnan(error)
           else "") + ".",
        holm_family(table),
    ]
    sides = ((label_a, int(table["n_a"].iloc[0]), settings_a or []), (label_b, int(table["n_b"].iloc[0]), settings_b or []))
    for label, _, settings in sides:
        sampled = sorted({str(s["sample"]) for s in settings if str(s.get("sample", FULL)) != FULL})
        if sampled:
            lines.append(f"WARNING: {label} ran on a sample of {' | '.join(sampled)} pairs per split "
                         f"(eval.sample_pairs): its figures are not the protocol's; score it again with "
                         "eval.sample_pairs=null (mode=eval) before reporting them.")
    for label, n, _ in sides:
        if n < MIN_SEEDS:
            lines.append(f"WARNING: {n} seed(s) for {label} (fewer than {MIN_SEEDS}): seed variance (about 1–2 points "
                         "of STS between seeds) is " + ("not in the interval or p: they cover the pairs' noise only"
                                                       if n < 2 else "poorly estimated by Welch's test")
                         + f"; compare over seeds={MIN_SEEDS} or more before calling a difference real.")
    if settings_a and settings_b:
        for name, what in EVAL_SETTINGS.items():
            seen_a = list(dict.fromkeys(str(s.get(name, "not recorded")) for s in settings_a))
            seen_b = list(dict.fromkeys(str(s.get(name, "not recorded")) for s in settings_b))
            if set(seen_a) != set(seen_b):
                lines.append(f"WARNING: the sides differ in {what}: {label_a}: {' | '.join(seen_a)}; {label_b}: "
                             f"{' | '.join(seen_b)}: the difference mixes that setting with what was compared.")
    if (table["welch_note"] == ZERO_VARIANCE).any():
        lines.append("Seed test: the replicates have zero variance on both sides: no test (zero variance), no mark.")
    return lines


#: a sweep metric -> the pair-scores task whose paired bootstrap tests it when a point has one seed
METRIC_TASKS = {"best_stsb_dev": "stsb_dev", "stsb_dev": "stsb_dev", "sts_avg": AVERAGE}


def welch(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Welch's test of mean(a) − mean(b) over seeds: (CI low, CI high, two-sided p); NaNs below two seeds a side."""
    a_, b_, result = _welch_result(a, b)
    if result is None:
        return math.nan, math.nan, math.nan
    ci = result.confidence_interval(confidence)
    return float(ci.low), float(ci.high), float(result.pvalue)


def against_reference(
    values: dict[str, Sequence[float]],
    reference: str,
    pair_scores: Any = None,
    task: str | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    alpha: float = 0.05,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Each point against the reference point: the difference of means and whether it is beyond noise.

    With two seeds or more on both sides the test is Welch's t over the seeds (its CI of the difference
    and p; none when no side has seed variance: :data:`ZERO_VARIANCE`); otherwise, when
    ``pair_scores(point)`` gives the point's runs' pair scores and the metric has a pair-scores ``task``
    (:data:`METRIC_TASKS`), the paired bootstrap over that task's pairs (Δ, CI and :func:`bootstrap_p` of the task's
    figure recomputed from them): that one holds the pairs' noise only (``kind = "pairs"``). The p-values of all points tested are one
    family: ``p_holm`` is Holm's adjustment over them, and a point is ``significant`` when p_holm < ``alpha``.

    Args:
        values: point label -> its runs' figures (one per seed).
        reference: the reference point's label (a key of ``values``).
        pair_scores: ``label -> list of PairScores`` (or None: no bootstrap fallback).
        task: the pair-scores task of the compared metric (None: no bootstrap fallback).
        n_resamples: bootstrap resamples.
        alpha: the significance level.
        seed: the bootstrap's random seed.

    Returns:
        One row per point: ``point, delta, delta_ci_low, delta_ci_high, p, p_holm, test, kind, figure, significant``
        (the reference's own row has ``test = "reference"``; ``kind``: ``seeds``, ``pairs`` or empty; ``figure``:
        with ``pairs``, the quantity Δ, its interval and p are all computed on, ``stsb_dev, dev, 1379 pairs``:
        the task's figure recomputed from the runs' saved pair scores).
    """
    ref = [v for v in values[reference] if not math.isnan(v)]
    rows = []
    for label, figures in values.items():
        mine = [v for v in figures if not math.isnan(v)]
        row = {"point": label, "delta": math.nan, "delta_ci_low": math.nan, "delta_ci_high": math.nan,
               "p": math.nan, "test": "", "kind": "", "figure": "", "significant": False}
        if label == reference:
            row["test"] = "reference"
        elif mine and ref:
            row["delta"] = float(np.mean(mine) - np.mean(ref))
            if len(mine) >= 2 and len(ref) >= 2:
                if welch_reason(mine, ref) == ZERO_VARIANCE:
                    row.update(test=ZERO_VARIANCE, kind="seeds")
                else:
                    low, high, p = welch(mine, ref, 1 - alpha)
                    row.update(delta_ci_low=low, delta_ci_high=high, p=p, test="Welch t (seeds)", kind="seeds")
            elif pair_scores is not None and task is not None:
                try:
                    side, base = pair_scores(label), pair_scores(reference)
                    table = paired_bootstrap(side, base, None if task == AVERAGE else [task],
                                             n_resamples=n_resamples, confidence=1 - alpha, seed=seed).set_index("task")
                    # Δ, interval and p of one quantity: the figure recomputed from the pairs the bootstrap resamples
                    # (the run's final evaluation of that task), not the sweep metric's mean beside another's interval
                    split = "test" if task == AVERAGE else split_of(task)
                    row.update(delta=float(table.loc[task, "difference"]),
                               delta_ci_low=float(table.loc[task, "ci_low"]), delta_ci_high=float(table.loc[task, "ci_high"]),
                               p=float(table.loc[task, "p"]), test=f"paired bootstrap ({split} pairs; one seed)",
                               kind="pairs", figure=f"{task}, {split}, {int(table.loc[task, 'pairs'])} pairs")
                except Exception as err:  # noqa: BLE001 (no pair scores for these runs: no test, said so)
                    row["test"] = f"none ({str(err).splitlines()[0][:80]})"
            else:
                row["test"] = "none (one seed, no pair scores)"
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame["p_holm"] = holm(frame["p"])
    frame["significant"] = [bool(not math.isnan(p) and p < alpha) for p in frame["p_holm"]]
    return frame


def mark(row: dict[str, Any]) -> str:
    """``+1.23*`` style text of an :func:`against_reference` row: the marks use the Holm-adjusted p
    (``*`` < 0.05, ``**`` < 0.01); no test, no mark."""
    if row["test"] == "reference":
        return "ref"
    if math.isnan(row["delta"]):
        return "—"
    return f"{row['delta']:+.2f}{stars(row.get('p_holm', math.nan))}"
