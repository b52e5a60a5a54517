"""Evaluation of any sentence encoder: STS, SentEval transfer tasks, and embedding geometry.

The package imports neither ``cl_bench.train`` nor ``cl_bench.methods``; an encoder is anything
with ``encode(sentences, batch_size) -> np.ndarray`` of shape (N, H).
"""

from cl_bench.eval.suite import evaluate, evaluate_dev, format_table
from cl_bench.eval.tasks import (
    ALL_TASKS,
    SELECT_METRICS,
    STS_TASKS,
    TASK_GROUPS,
    TRANSFER_TASKS,
    EvalConfigError,
    check_eval_config,
    resolve_tasks,
)

__all__ = [
    "ALL_TASKS",
    "SELECT_METRICS",
    "STS_TASKS",
    "TASK_GROUPS",
    "TRANSFER_TASKS",
    "EvalConfigError",
    "check_eval_config",
    "evaluate",
    "evaluate_dev",
    "format_table",
    "resolve_tasks",
]
