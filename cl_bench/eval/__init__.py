"""Evaluation of any sentence encoder: STS, SentEval transfer tasks, and embedding geometry.

The package imports neither ``cl_bench.train`` nor ``cl_bench.methods``; an encoder is anything
with ``encode(sentences, batch_size) -> np.ndarray`` of shape (N, H). The tasks are the entries of
:mod:`cl_bench.eval.registry` (:func:`register_task` adds one).
"""

from __future__ import annotations

import importlib
from typing import Any

from cl_bench.eval.registry import TASKS, EvalTask, groups, register_task

#: names re-exported from the submodules that load numpy/torch/scikit-learn, imported on first use so that
#: ``cl_bench.eval.registry`` (``cl-bench list``, the checks before a model loads) imports none of them
_LAZY = {"evaluate": "suite", "evaluate_dev": "suite", "format_table": "suite", "SELECT_METRICS": "tasks",
         "EvalConfigError": "tasks", "check_eval_config": "tasks", "resolve_tasks": "tasks",
         "EvalOptions": "options"}


def __getattr__(name: str) -> Any:
    """``from cl_bench.eval import evaluate``: the submodule that defines it, imported now (PEP 562)."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f"cl_bench.eval.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cl_bench.eval' has no attribute '{name}'")

__all__ = [
    "SELECT_METRICS",
    "TASKS",
    "EvalConfigError",
    "EvalOptions",
    "EvalTask",
    "check_eval_config",
    "evaluate",
    "evaluate_dev",
    "format_table",
    "groups",
    "register_task",
    "resolve_tasks",
]
