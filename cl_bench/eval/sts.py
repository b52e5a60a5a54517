"""STS scoring as SentEval/SimCSE do it: cosine of raw embeddings, Spearman x 100.

* STS12–16: one figure per sub-dataset, and the three SentEval aggregations over a year:
  ``all`` (sub-datasets concatenated, one Spearman: the figure SimCSE reports, key ``sts12``),
  ``mean`` (plain mean of sub-dataset Spearmans, key ``sts12_mean``) and ``wmean`` (mean weighted
  by sub-dataset size, key ``sts12_wmean``). Sub-dataset keys are ``<task>_<subset>`` with the
  SentEval subset name's ``.`` and ``-`` turned into ``_`` (``sts12_surprise_OnWN``,
  ``sts14_deft_forum``).
* STS-B and SICK-R: Spearman on the test split (``stsb``, ``sickr``) and on the dev split
  (``stsb_dev``, ``sickr_dev``). No regressor is trained; train splits are read only to fit
  BERT-whitening.
* Optional post-processing (``postprocess``: BERT-whitening or BERT-flow,
  :mod:`cl_bench.eval.postprocess`): fitted per task on every pair's two sentences of all its
  sub-datasets / splits (BERT-whitening's ``normalized_by='target'``), then cosine.

Parsed files are cached (:func:`cl_bench.eval.registry.load_task`), so repeated dev evaluations
only re-encode. :func:`score_sts_subsets` and :func:`score_sts_splits` are the registry's two STS
scorers (an STS-style task of one's own takes either).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from sklearn.metrics.pairwise import paired_euclidean_distances, paired_manhattan_distances

from cl_bench.data.senteval import ScoredPairs
from cl_bench.eval.geometry import cosine_rows
from cl_bench.eval.pair_scores import aggregate_subsets, spearman100
from cl_bench.eval.postprocess import PostProcess
from cl_bench.eval.registry import ScoreOptions, get_task, load_task, task_sentences

Embed = Callable[[Sequence[str]], np.ndarray]


def metric_suffix(subset: str) -> str:
    """Sub-dataset name as used in metric keys: ``surprise.OnWN`` -> ``surprise_OnWN``."""
    return subset.replace(".", "_").replace("-", "_")


def load_sts_task(
    data_dir: str | Path, task: str, splits: Sequence[str] = ("dev", "test")
) -> dict[str, ScoredPairs]:
    """Parsed pairs of one STS task (cached).

    Args:
        data_dir: the data root.
        task: an STS task of the registry (``sts12`` … ``sts16``, ``stsb``, ``sickr``, ...).
        splits: for a task with splits (``stsb``/``sickr``), which to return (``train``, ``dev``, ``test``).

    Returns:
        Sub-dataset name -> pairs (STS12–16) or split name -> pairs (STS-B, SICK-R).
    """
    entry = get_task(task)
    if entry.kind != "sts":
        raise ValueError(f"not an STS task: '{task}'")
    return load_task(data_dir, task, splits if entry.scored_parts else None)




def similarity_spearmans(task: str, pairs: ScoredPairs, embed: Embed) -> dict[str, float]:
    """Spearman x 100 of four similarity functions on one split, and their maxima with and without the dot product.

    sentence-transformers' ``EmbeddingSimilarityEvaluator`` (IS-BERT's and BSL's forks, lines 81-129) scores
    cosine, negative Manhattan and Euclidean distances and the dot product, and returns the best of
    the four Spearmans when no ``main_similarity`` is given, which is how IS-BERT and BSL pick their
    checkpoints (``<task>_max_similarity``). sentence-transformers v0.2.0 (Sentence-BERT's release,
    evaluation/EmbeddingSimilarityEvaluator.py, its last lines) has no dot product: it returns the best
    of the cosine, Manhattan and Euclidean Spearmans (``<task>_max_similarity_no_dot``).

    Returns:
        ``<task>_cosine``, ``<task>_manhattan``, ``<task>_euclidean``, ``<task>_dot``,
        ``<task>_max_similarity`` and ``<task>_max_similarity_no_dot``.
    """
    first, second = embed(pairs.sent1), embed(pairs.sent2)
    system = {
        "cosine": cosine_rows(first, second),
        "manhattan": -paired_manhattan_distances(first, second),
        "euclidean": -paired_euclidean_distances(first, second),
        "dot": (first * second).sum(axis=1),
    }
    results = {f"{task}_{name}": spearman100(scores, pairs.gold) for name, scores in system.items()}
    def best(names: tuple[str, ...]) -> float:
        finite = [results[f"{task}_{n}"] for n in names if not np.isnan(results[f"{task}_{n}"])]  # constant: NaN
        return max(finite, default=float("nan"))

    results[f"{task}_max_similarity"] = best(("cosine", "manhattan", "euclidean", "dot"))
    results[f"{task}_max_similarity_no_dot"] = best(("cosine", "manhattan", "euclidean"))
    return results


def _cosines(
    parts: dict[str, ScoredPairs], embed: Embed, postprocess: PostProcess | None
) -> dict[str, np.ndarray]:
    """Cosine of each pair of every part, after a post-processing fitted on all the parts' sentences."""
    transform: Callable[[np.ndarray], np.ndarray] = lambda x: x  # noqa: E731
    if postprocess is not None:
        transform = postprocess.transform_for(embed, task_sentences(parts))
    return {name: cosine_rows(transform(embed(p.sent1)), transform(embed(p.sent2))) for name, p in parts.items()}


def score_sts_subsets(
    name: str, parts: dict[str, ScoredPairs], embed: Embed, options: ScoreOptions
) -> dict[str, float]:
    """The registry's scorer of a task made of sub-datasets (STS12–16): SentEval's three aggregations.

    Returns:
        ``name`` (all sub-datasets pooled), ``<name>_mean``, ``<name>_wmean`` and ``<name>_<subset>``
        for each sub-dataset (:func:`metric_suffix`).
    """
    system = _cosines(parts, embed, options.postprocess)
    gold = {part: p.gold for part, p in parts.items()}
    if options.pair_scores is not None:
        options.pair_scores[name] = {part: (system[part], gold[part]) for part in parts}
    aggregations = aggregate_subsets(system, gold)
    results = {name: aggregations["all"], f"{name}_mean": aggregations["mean"], f"{name}_wmean": aggregations["wmean"]}
    for part in parts:
        results[f"{name}_{metric_suffix(part)}"] = spearman100(system[part], gold[part])
    return results


def score_sts_splits(
    name: str, parts: dict[str, ScoredPairs], embed: Embed, options: ScoreOptions
) -> dict[str, float]:
    """The registry's scorer of a task with splits (STS-B, SICK-R): Spearman of the test and dev splits.

    A ``train`` split is not scored (it is there to fit a post-processing).

    Returns:
        ``name`` (test) and ``<name>_dev`` (dev), for the splits given.
    """
    system = _cosines(parts, embed, options.postprocess)
    results = {}
    for split, key in (("test", name), ("dev", f"{name}_dev")):  # the test split is the task's figure
        if split in parts:
            results[key] = spearman100(system[split], parts[split].gold)
            if options.pair_scores is not None:
                options.pair_scores[key] = {split: (system[split], parts[split].gold)}
    return results
