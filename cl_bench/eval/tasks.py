"""Choosing tasks, the data files they need, and the pre-flight check; the tasks themselves are the
registry's (:mod:`cl_bench.eval.registry`).

:func:`check_eval_config` validates ``eval.tasks``, the ``eval.*`` options (:class:`~cl_bench.eval.options.EvalOptions`)
and the presence of every data file a run will read, before any model loads (the CLI calls it during config
validation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from cl_bench.eval.flow_options import fits_per_task
from cl_bench.eval.options import (
    GEOMETRY_SPLITS,
    EvalConfigError,
    EvalOptions,
)
from cl_bench.eval.registry import BUILTIN, TASKS, get_task, groups, tasks_in_average
from cl_bench.models.encoding_options import (
    InferenceConfigError,
    check_backend_and_precision,
    check_cache_options,
)

#: Dev figures that can pick the best checkpoint during training (``train.select_metric``).
#: ``stsb_dev_max_similarity``: the best of the cosine, Manhattan, Euclidean and dot-product Spearmans on
#: STS-B dev (sentence-transformers' EmbeddingSimilarityEvaluator without ``main_similarity``: IS-BERT, BSL).
#: ``stsb_dev_max_similarity_no_dot``: the best of the cosine, Manhattan and Euclidean Spearmans (the same
#: evaluator in sentence-transformers v0.2.0, which has no dot product: Sentence-BERT's presets).
SELECT_METRICS: tuple[str, ...] = ("stsb_dev", "sts_dev_avg", "transfer_dev_avg", "stsb_dev_max_similarity",
                                   "stsb_dev_max_similarity_no_dot")
#: The select metrics made of :func:`cl_bench.eval.sts.similarity_spearmans` on STS-B dev.
SIMILARITY_SELECT_METRICS: tuple[str, ...] = ("stsb_dev_max_similarity", "stsb_dev_max_similarity_no_dot")
#: The dev average every dev evaluation reports (STS-B + SICK-R dev).
ALWAYS_DEV_AVERAGE = "sts_dev_avg"
#: The task whose pairs alignment/uniformity/anisotropy are computed on.
GEOMETRY_TASK = "stsb"

DATA_HINT = "get the data with `cl-bench-data download` and set CL_BENCH_DATA or paths.data_dir"


def resolve_tasks(tasks: str | Iterable[str]) -> list[str]:
    """Expand groups (``sts``, ``transfer``, a registered task's group) and return the task names in registry order.

    Args:
        tasks: group and/or task names (a single string is one name).

    Returns:
        Unique task names ordered as in the registry.

    Raises:
        EvalConfigError: on an unknown name or an empty list.
    """
    names = [tasks] if isinstance(tasks, str) else list(tasks)
    if not names:
        raise EvalConfigError("eval.tasks: empty; give groups (sts, transfer) and/or task names")
    task_groups = groups()
    chosen: set[str] = set()
    for name in names:
        key = str(name).strip().lower()
        if key in task_groups:
            chosen.update(task_groups[key])
        elif key in TASKS:
            chosen.add(key)
        else:
            valid = ", ".join(dict.fromkeys((*task_groups, *TASKS)))
            raise EvalConfigError(f"eval.tasks: unknown task '{name}'; valid: {valid}")
    return [task for task in TASKS if task in chosen]


def required_files(
    tasks: Sequence[str],
    align_uniform: bool = False,
    anisotropy: bool = False,
    align_uniform_split: str = "all",
    fit_per_task: bool = False,
) -> list[str]:
    """Every data file (relative to the data root) an evaluation with these options reads.

    ``fit_per_task``: a post-processing (whitening, flow) is fitted on each task's sentences, which
    then needs every part of every task (STS-B's and SICK-R's train splits too, and all of STS-B for
    the geometry).
    """
    files: list[str] = []
    for name in tasks:
        task = get_task(name)
        files += task.files(task.final_parts(fit_per_task))
    if align_uniform or anisotropy:
        splits = tuple(TASKS[GEOMETRY_TASK].parts) if fit_per_task else GEOMETRY_SPLITS[align_uniform_split]
        files += TASKS[GEOMETRY_TASK].files(splits)
    return list(dict.fromkeys(files))


def dev_tasks(select_metric: str) -> list[str]:
    """The tasks a dev evaluation scores: those of ``sts_dev_avg`` always, those of ``transfer_dev_avg`` when it selects."""
    names = tasks_in_average(ALWAYS_DEV_AVERAGE)
    if select_metric == "transfer_dev_avg":
        names += tasks_in_average("transfer_dev_avg")
    return list(dict.fromkeys(names))


def dev_required_files(select_metric: str) -> list[str]:
    """Files read by :func:`cl_bench.eval.evaluate_dev` for ``select_metric``."""
    files = [path for name in dev_tasks(select_metric) for path in TASKS[name].files(TASKS[name].dev_read_parts())]
    return list(dict.fromkeys(files))


def check_eval_config(
    data_dir: str | Path,
    tasks: str | Iterable[str] = ("sts",),
    options: EvalOptions | None = None,
    select_metric: str | None = None,
    *,
    eval_device: str | None = None,
    files: bool = True,
    device_checks: bool = True,
) -> list[str]:
    """Validate an evaluation's tasks and options and the presence of their data files, before any model loads.

    The config's call: ``check_eval_config(data_dir, tasks, EvalOptions.from_config(cfg.eval),
    cfg.train.select_metric, eval_device=cfg.train.device)``.

    Args:
        data_dir: the data root (with ``sts/`` and ``transfer/``).
        tasks: ``eval.tasks``: groups and/or task names.
        options: the ``eval.*`` options (None: the defaults): :meth:`EvalOptions.check`'s rules, then the
            encoding options' for ``eval_device`` (:mod:`cl_bench.models.encoding_options`, and with ``device_checks``
            :func:`cl_bench.models.inference.check_inference_options`).
        select_metric: ``train.select_metric`` to check as well (None skips it).
        eval_device: ``train.device``, where evaluation encodes (bf16 is checked there); None or ``auto``: CUDA
            when present, else the CPU.
        files: also check the data root and every data file the options read (False: the values alone, the
            job's check before the model and the data are looked for).
        device_checks: also check what this machine allows (ONNX Runtime installed, bf16/TF32 on ``eval_device``),
            which imports torch (False: ``cl-bench``'s checks before torch loads; the job makes them).

    Returns:
        The resolved task names.

    Raises:
        EvalConfigError: one line naming the key (``eval.tasks: ...``) or the missing path.
    """
    options = EvalOptions() if options is None else options
    resolved = resolve_tasks(tasks)
    options.check()
    try:
        check_backend_and_precision(options.backend, options.precision)
        check_cache_options(options.cache, options.cache_dir, options.cache_size_gb)
        if device_checks:  # what this machine allows (ONNX Runtime installed, bf16/TF32 on the device): torch
            from cl_bench.models.inference import check_inference_options

            check_inference_options(options.backend, options.precision, eval_device)
    except InferenceConfigError as err:
        raise EvalConfigError(str(err)) from err
    if select_metric is not None and select_metric not in SELECT_METRICS:
        raise EvalConfigError(
            f"train.select_metric: unknown '{select_metric}'; valid: {', '.join(SELECT_METRICS)}"
        )
    if files:
        check_eval_data(data_dir, resolved, options, select_metric)
    return resolved


def check_eval_data(data_dir: str | Path, tasks: str | Iterable[str], options: EvalOptions,
                    select_metric: str | None = None) -> None:
    """The data files half of :func:`check_eval_config`: the data root and every file the evaluation of ``tasks``
    with ``options`` reads, and those of ``select_metric``'s dev figures (their values already checked).

    Raises:
        EvalConfigError: one line naming the missing path.
    """
    resolved = resolve_tasks(tasks)
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise EvalConfigError(f"{root}: missing data root (a folder with sts/ and transfer/); {DATA_HINT}")
    needed = required_files(resolved, options.align_uniform, options.anisotropy, options.align_uniform_split,
                            fits_per_task(options.postprocess, options.flow))
    if select_metric is not None:
        needed += dev_required_files(select_metric)
    for relative in dict.fromkeys(needed):
        path = root / relative
        if not path.is_file():
            owner = next((name for name in resolved if relative in TASKS[name].files()), None)
            if owner is not None and owner not in BUILTIN:  # cl-bench-data knows only the built-in tasks' files
                raise EvalConfigError(f"{path}: missing data file of evaluation task '{owner}' (not a built-in "
                                      "task: put its files in the data root)")
            raise EvalConfigError(f"{path}: missing data file; {DATA_HINT}")
