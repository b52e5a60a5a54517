"""Per-pair STS scores and the figures made from them: Spearman x 100 as ``scipy.stats.spearmanr`` computes it, SentEval's
aggregations over sub-datasets, and the ``pair_scores.npz`` file a run writes.

numpy only: the STS scorers (:mod:`cl_bench.eval.sts`) compute with it, and the report's paired bootstrap
(:mod:`cl_bench.reporting.significance`, ``cl-bench-report --compare``) resamples a run's file with it without
loading the encoders' stack (torch, scikit-learn).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their average rank (``scipy.stats.rankdata(method="average")``)."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    first = np.empty(len(ordered), dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inverse = np.empty(len(values), dtype=np.intp)
    inverse[order] = np.arange(len(values))
    dense = first.cumsum()[inverse]
    bounds = np.append(np.flatnonzero(first), len(first))
    return 0.5 * (bounds[dense] + bounds[dense - 1] + 1)


def spearman100(system: np.ndarray, gold: np.ndarray) -> float:
    """Spearman rank correlation x 100 (NaN when either side is constant).

    Pearson's r of the average ranks, which is what ``scipy.stats.spearmanr`` computes (equal to it within
    1e-12, tests/reporting/test_significance.py), without its per-call overhead: the paired bootstrap of
    ``cl-bench-report --compare`` calls this hundreds of thousands of times.
    """
    if len(gold) < 2 or np.ptp(system) == 0 or np.ptp(gold) == 0:
        return float("nan")
    ranks_s = _average_ranks(np.asarray(system, dtype=np.float64))
    ranks_g = _average_ranks(np.asarray(gold, dtype=np.float64))
    ranks_s -= ranks_s.mean()
    ranks_g -= ranks_g.mean()
    return float((ranks_s @ ranks_g) / np.sqrt((ranks_s @ ranks_s) * (ranks_g @ ranks_g)) * 100.0)


def aggregate_subsets(system: dict[str, np.ndarray], gold: dict[str, np.ndarray]) -> dict[str, float]:
    """SentEval's three aggregations of per-sub-dataset scores.

    Args:
        system: sub-dataset -> predicted similarities.
        gold: sub-dataset -> gold scores.

    Returns:
        ``{"all": Spearman of the concatenation, "mean": mean of sub-dataset Spearmans,
        "wmean": their mean weighted by sub-dataset size}``, all x 100.
    """
    names = list(gold)
    per_subset = np.array([spearman100(system[name], gold[name]) for name in names])
    sizes = np.array([len(gold[name]) for name in names], dtype=np.float64)
    return {
        "all": spearman100(
            np.concatenate([system[n] for n in names]), np.concatenate([gold[n] for n in names])
        ),
        "mean": float(np.mean(per_subset)),
        "wmean": float(np.average(per_subset, weights=sizes)),
    }


PairScores = dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]  # task -> part -> (system, gold)
_SEPARATOR = "::"


def task_figure(system: dict[str, np.ndarray], gold: dict[str, np.ndarray], aggregation: str = "all") -> float:
    """A task's headline figure from its parts' pair scores: SentEval's aggregation over the sub-datasets
    (``all`` for STS12–16 as SimCSE reports; a split task's one part gives its Spearman)."""
    return aggregate_subsets(system, gold)[aggregation]


def save_pair_scores(path: str | Path, scores: PairScores) -> Path:
    """Write every pair's similarity and gold score, float64 as computed (one ``.npz``, ~0.3 MB for the seven
    STS tasks): float32 would round near-equal similarities into ties and move a Spearman by 0.001.

    Keys are ``<task>::<part>::system`` and ``<task>::<part>::gold``; the pairs keep the data files' order,
    so two runs' arrays of a part are the same pairs, index by index.
    """
    arrays = {}
    for task, parts in scores.items():
        for part, (system, gold) in parts.items():
            arrays[f"{task}{_SEPARATOR}{part}{_SEPARATOR}system"] = np.asarray(system, dtype=np.float64)
            arrays[f"{task}{_SEPARATOR}{part}{_SEPARATOR}gold"] = np.asarray(gold, dtype=np.float64)
    path = Path(path)
    with path.open("wb") as fh:
        np.savez_compressed(fh, **arrays)
    return path


def load_pair_scores(path: str | Path) -> PairScores:
    """Read :func:`save_pair_scores`'s file back: ``{task: {part: (system, gold)}}``."""
    scores: PairScores = {}
    with np.load(path) as data:
        for key in data.files:
            task, part, kind = key.split(_SEPARATOR)
            if kind == "system":
                gold = data[f"{task}{_SEPARATOR}{part}{_SEPARATOR}gold"]
                scores.setdefault(task, {})[part] = (data[key].astype(np.float64), gold.astype(np.float64))
    return scores
