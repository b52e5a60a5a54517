"""Evaluation of any sentence encoder: STS, SentEval transfer tasks, and embedding geometry.

The package imports neither ``cl_bench.train`` nor ``cl_bench.methods``; an encoder is anything
with ``encode(sentences, batch_size) -> np.ndarray`` of shape (N, H). The tasks are the entries of
:mod:`cl_bench.eval.registry` (:func:`register_task` adds one).
"""

from cl_bench.eval.registry import TASKS, EvalTask, groups, register_task
from cl_bench.eval.suite import evaluate, evaluate_dev, format_table
from cl_bench.eval.tasks import (
    SELECT_METRICS,
    EvalConfigError,
    check_eval_config,
    resolve_tasks,
)

__all__ = [
    "SELECT_METRICS",
    "TASKS",
    "EvalConfigError",
    "EvalTask",
    "check_eval_config",
    "evaluate",
    "evaluate_dev",
    "format_table",
    "groups",
    "register_task",
    "resolve_tasks",
]
