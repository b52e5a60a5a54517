"""Is encoder A better than encoder B beyond noise? Two tests, both with scipy's implementations.

* **Test-set noise, paired bootstrap** (:func:`paired_bootstrap`): the same STS test pairs were scored
  by both encoders; ``scipy.stats.bootstrap(..., paired=True)`` resamples pairs (each pair keeps its
  gold score and both encoders' similarities, and its sub-dataset), and on every resample each task's
  figure is recomputed with SentEval's aggregation (:func:`cl_bench.eval.sts.task_figure`, ``all`` for
  STS12–16) and the average over the tasks. The interval is the bootstrap's percentile interval of
  A − B (``method`` picks another of scipy's). With several seeds on a side, a side's figure is the
  mean of its seeds' figures on the same resampled pairs.
* **Seed noise, Welch's t-test** (:func:`seed_test`): ``scipy.stats.ttest_ind(equal_var=False)`` on
  the per-seed figures of the two sides (needs two seeds or more on each side).

The paired bootstrap says whether a difference survives resampling the test set for these exact
weights; Welch's test whether it survives retraining with other seeds. A reviewer wants both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd

from cl_bench.eval.sts import PairScores, task_figure

AVERAGE = "avg"


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
    from cl_bench.eval.registry import average_members

    names = [t for t in a[0] if all(t in s for s in (*a, *b))]
    if tasks is None:
        members = [t for t in names if t in average_members().get("sts_avg", [])]
        return members or names
    return [t for t in names if t in tasks]


def _flatten(a: Sequence[PairScores], b: Sequence[PairScores], tasks: Sequence[str]) -> _Flat:
    if not a or not b:
        raise ValueError("each side needs at least one run's pair scores")
    parts, keys, group, gold = [], [], [], []
    sys_a: list[list[np.ndarray]] = [[] for _ in a]
    sys_b: list[list[np.ndarray]] = [[] for _ in b]
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
            for i, side in enumerate(a):
                sys_a[i].append(side[task][part][0])
            for i, side in enumerate(b):
                sys_b[i].append(side[task][part][0])
    return _Flat(list(tasks), parts, np.concatenate(group), keys, np.concatenate(gold),
                 [np.concatenate(x) for x in sys_a], [np.concatenate(x) for x in sys_b])


def _figures(flat: _Flat, group: np.ndarray, gold: np.ndarray, systems: Sequence[np.ndarray],
             aggregation: str) -> np.ndarray:
    """Per task, the mean over ``systems`` (seeds) of the task's aggregated figure on these pairs."""
    masks = [group == k for k in range(len(flat.keys))]
    out = np.empty(len(flat.tasks))
    for t in range(len(flat.tasks)):
        mine = [(p, masks[k]) for k, (tt, p) in enumerate(flat.keys) if tt == t]
        gold_parts = {flat.parts[t][p]: gold[m] for p, m in mine}
        values = [task_figure({flat.parts[t][p]: s[m] for p, m in mine}, gold_parts, aggregation) for s in systems]
        out[t] = float(np.mean(values))
    return out


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
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
    aggregation: str = "all",
) -> pd.DataFrame:
    """A − B per task and for their average, with a paired-bootstrap confidence interval.

    Args:
        a: side A's runs (one per seed), each ``{task: {part: (similarities, gold)}}``
            (:func:`cl_bench.eval.sts.load_pair_scores`).
        b: side B's runs, scored on the same pairs.
        tasks: the tasks to compare (default: every task all runs have).
        n_resamples: bootstrap resamples.
        confidence: the interval's level.
        method: ``scipy.stats.bootstrap``'s ``percentile`` | ``basic`` | ``BCa``.
        seed: the resampling's random seed.
        aggregation: SentEval's aggregation of sub-datasets (``all`` | ``mean`` | ``wmean``).

    Returns:
        One row per task and a last row ``avg`` (their mean): ``task, a, b, difference, ci_low, ci_high,
        pairs``; ``a``/``b`` are the figures on the full test set (mean over seeds).

    Raises:
        ValueError: no common task, or the runs scored different pairs.
    """
    from scipy.stats import bootstrap

    names = common_tasks(a, b, tasks)
    if not names:
        raise ValueError("the two sides have no STS task in common (no pair scores?)")
    flat = _flatten(a, b, names)
    n_a = len(flat.a)

    def statistic(group: np.ndarray, gold: np.ndarray, *systems: np.ndarray) -> np.ndarray:
        diff = (_figures(flat, group, gold, systems[:n_a], aggregation)
                - _figures(flat, group, gold, systems[n_a:], aggregation))
        return np.append(diff, diff.mean())

    data = (flat.group, flat.gold, *flat.a, *flat.b)
    full_a = _figures(flat, flat.group, flat.gold, flat.a, aggregation)
    full_b = _figures(flat, flat.group, flat.gold, flat.b, aggregation)
    result = bootstrap(data, statistic, paired=True, vectorized=False, n_resamples=n_resamples,
                       confidence_level=confidence, method=method, rng=np.random.default_rng(seed))
    low, high = np.atleast_1d(result.confidence_interval.low), np.atleast_1d(result.confidence_interval.high)
    rows = []
    sizes = [int(sum((flat.group == k).sum() for k, (t, _) in enumerate(flat.keys) if t == i)) for i in range(len(names))]
    for i, task in enumerate([*names, AVERAGE]):
        fa = float(full_a[i]) if i < len(names) else float(full_a.mean())
        fb = float(full_b[i]) if i < len(names) else float(full_b.mean())
        rows.append({"task": task, "a": fa, "b": fb, "difference": fa - fb,
                     "ci_low": float(low[i]), "ci_high": float(high[i]),
                     "pairs": sizes[i] if i < len(names) else int(sum(sizes))})
    return pd.DataFrame(rows)


def seed_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's t-test (``scipy.stats.ttest_ind(equal_var=False)``) of per-seed figures: (t, two-sided p).

    NaNs when a side has fewer than two seeds.
    """
    a_, b_, result = _welch_result(a, b)
    if result is not None:
        return float(result.statistic), float(result.pvalue)
    if len(a_) < 2 or len(b_) < 2:
        return math.nan, math.nan
    # no seed variance at all: t is undefined
    return (math.nan, 1.0) if a_[0] == b_[0] else (math.copysign(math.inf, a_[0] - b_[0]), 0.0)


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
    NaN unless both sides have two seeds or more) and the seed counts ``n_a``, ``n_b``.

    ``options`` are :func:`paired_bootstrap`'s (its defaults); the per-seed figures Welch's test
    compares use the same ``aggregation``.
    """
    table = paired_bootstrap(a, b, tasks, **options)
    names = [t for t in table["task"] if t != AVERAGE]
    aggregation = options.get("aggregation", "all")
    seeds_a, seeds_b = per_seed_figures(a, names, aggregation), per_seed_figures(b, names, aggregation)
    tests = [seed_test(list(seeds_a[t]), list(seeds_b[t])) for t in table["task"]]
    return table.assign(n_a=len(a), n_b=len(b), welch_t=[t for t, _ in tests], welch_p=[p for _, p in tests])


def markdown_compare(table: pd.DataFrame, label_a: str, label_b: str, confidence: float = 0.95) -> str:
    """The comparison as markdown: per task A, B, A − B, its paired-bootstrap CI, and Welch's p over seeds."""
    level = f"{confidence * 100:g}%"
    shown = pd.DataFrame({
        "task": table["task"],
        f"A: {label_a} (n={table['n_a'].iloc[0]})": [f"{v:.2f}" for v in table["a"]],
        f"B: {label_b} (n={table['n_b'].iloc[0]})": [f"{v:.2f}" for v in table["b"]],
        "A − B": [f"{v:+.2f}" for v in table["difference"]],
        f"{level} CI (paired bootstrap)": [f"[{lo:+.2f}, {hi:+.2f}]" for lo, hi in zip(table["ci_low"], table["ci_high"],
                                                                                      strict=True)],
        "Welch p (seeds)": ["—" if math.isnan(p) else f"{p:.3g}" for p in table["welch_p"]],
    })
    return shown.to_markdown(index=False, colalign=("left", *["right"] * (len(shown.columns) - 1)), disable_numparse=True)


#: a sweep metric -> the pair-scores task whose paired bootstrap tests it when a point has one seed
METRIC_TASKS = {"best_stsb_dev": "stsb_dev", "stsb_dev": "stsb_dev", "sts_avg": AVERAGE}


def welch(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Welch's test of mean(a) − mean(b) over seeds: (CI low, CI high, two-sided p); NaNs below two seeds a side."""
    a_, b_, result = _welch_result(a, b)
    if result is None:
        return math.nan, math.nan, seed_test(a_, b_)[1]
    ci = result.confidence_interval(confidence)
    return float(ci.low), float(ci.high), float(result.pvalue)


def against_reference(
    values: dict[str, Sequence[float]],
    reference: str,
    pair_scores: Any = None,
    task: str | None = None,
    n_resamples: int = 1000,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Each point against the reference point: the difference of means and whether it is beyond noise.

    With two seeds or more on both sides the test is Welch's t over the seeds (its CI of the difference
    and p); otherwise, when ``pair_scores(point)`` gives the point's runs' pair scores and the metric has
    a pair-scores ``task`` (:data:`METRIC_TASKS`), the paired bootstrap over the test pairs (significant
    when its CI excludes 0; no p). A point is ``significant`` when p < ``alpha`` or the CI excludes 0.

    Args:
        values: point label -> its runs' figures (one per seed).
        reference: the reference point's label (a key of ``values``).
        pair_scores: ``label -> list of PairScores`` (or None: no bootstrap fallback).
        task: the pair-scores task of the compared metric (None: no bootstrap fallback).
        n_resamples: bootstrap resamples.
        alpha: the significance level.

    Returns:
        One row per point: ``point, delta, delta_ci_low, delta_ci_high, p, test, significant`` (the
        reference's own row has ``test = "reference"``).
    """
    ref = [v for v in values[reference] if not math.isnan(v)]
    rows = []
    for label, figures in values.items():
        mine = [v for v in figures if not math.isnan(v)]
        row = {"point": label, "delta": math.nan, "delta_ci_low": math.nan, "delta_ci_high": math.nan,
               "p": math.nan, "test": "", "significant": False}
        if label == reference:
            row["test"] = "reference"
        elif mine and ref:
            row["delta"] = float(np.mean(mine) - np.mean(ref))
            if len(mine) >= 2 and len(ref) >= 2:
                low, high, p = welch(mine, ref, 1 - alpha)
                row.update(delta_ci_low=low, delta_ci_high=high, p=p, test="Welch t (seeds)",
                           significant=bool(p < alpha))
            elif pair_scores is not None and task is not None:
                try:
                    side, base = pair_scores(label), pair_scores(reference)
                    table = paired_bootstrap(side, base, None if task == AVERAGE else [task],
                                             n_resamples=n_resamples, confidence=1 - alpha).set_index("task")
                    low, high = table.loc[task, "ci_low"], table.loc[task, "ci_high"]
                    row.update(delta_ci_low=float(low), delta_ci_high=float(high), test="paired bootstrap (pairs)",
                               significant=bool(low > 0 or high < 0))
                except Exception as err:  # noqa: BLE001 (no pair scores for these runs: no test, said so)
                    row["test"] = f"none ({str(err).splitlines()[0][:80]})"
            else:
                row["test"] = "none (one seed, no pair scores)"
        rows.append(row)
    return pd.DataFrame(rows)


def mark(row: dict[str, Any]) -> str:
    """``Δ = +1.23*`` style text of an :func:`against_reference` row (``*``: p < 0.05 or CI excludes 0, ``**``: p < 0.01)."""
    if row["test"] == "reference":
        return "ref"
    if math.isnan(row["delta"]):
        return "—"
    stars = "**" if row["significant"] and not math.isnan(row["p"]) and row["p"] < 0.01 else "*" if row["significant"] else ""
    return f"{row['delta']:+.2f}{stars}"
