"""Model-selection rules of the training loop: when early stopping fires, and which weights are final.

``train.early_stopping_rule``:

* ``no_gain`` (default): count the dev evaluations since the last new best; a new best resets it.
* ``drops``: SG-BERT's official ``SentenceTransformer.fit`` (galsang/SG-BERT modules.py, lines 239-307):
  count the evaluations whose score is *below the previous evaluation's*, never reset; the first
  evaluation is compared with 0 (``last_score = 0``). A run that oscillates stops sooner than with
  ``no_gain``; one that rises slowly with small dips also stops, where ``no_gain`` would go on.

Either way training stops once the count reaches ``train.early_stopping_patience`` (0 = never).

``train.final_weights``: ``best`` (default) evaluates the weights of the best dev evaluation;
``last`` evaluates the weights training ended with, as SG-BERT's training.py does (it scores
``model`` after ``fit`` returns, without reloading the best checkpoint it saved).
"""

from __future__ import annotations

from cl_bench.run_specs import EarlyStoppingRule, FinalWeights  # noqa: F401  (the values it decides between)


def early_stopping_count(rule: str, count: int, score: float, previous_score: float, improved: bool) -> int:
    """The early-stopping count after one dev evaluation.

    Args:
        rule: ``no_gain`` or ``drops`` (see the module docstring).
        count: the count before this evaluation.
        score: this evaluation's dev score.
        previous_score: the previous evaluation's score (0 before the first one, as SG-BERT).
        improved: whether ``score`` is a new best.

    Returns:
        The new count, compared with ``train.early_stopping_patience``.
    """
    if rule == "no_gain":
        return 0 if improved else count + 1
    if rule == "drops":
        return count + 1 if score < previous_score else count
    raise ValueError(f"train.early_stopping_rule: unknown '{rule}'; valid: {', '.join(EarlyStoppingRule)}")
