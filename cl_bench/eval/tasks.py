"""Choosing tasks, the data files they need, and the pre-flight check; the tasks themselves are the
registry's (:mod:`cl_bench.eval.registry`).

:func:`check_eval_config` validates ``eval.*`` options and the presence of every data file a run
will read, before any model loads (the CLI calls it during config validation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cl_bench.eval.registry import BUILTIN, TASKS, get_task, groups, tasks_in_average
from cl_bench.flow_options import check_postprocess, fits_per_task

#: The two SentEval classifier configurations (SimCSE ``--mode test`` / ``fasttest``): number of folds.
TRANSFER_CONFIGS: dict[str, int] = {"full": 10, "fast": 5}
#: ``eval.transfer_classifier``: SentEval's PyTorch classifier, or the scikit-learn approximation.
TRANSFER_CLASSIFIERS: tuple[str, ...] = ("senteval", "sklearn")
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
#: Which STS-B splits alignment/uniformity/anisotropy are computed on.
GEOMETRY_SPLITS: dict[str, tuple[str, ...]] = {
    "all": ("train", "dev", "test"),
    "train": ("train",),
    "dev": ("dev",),
    "test": ("test",),
}

DATA_HINT = "get the data with `cl-bench-data download` and set CL_BENCH_DATA or paths.data_dir"


class EvalConfigError(ValueError):
    """An invalid ``eval.*`` value or a missing data file; the one-line message names the key or path."""


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
    select_metric: str | None = None,
    batch_size: int = 128,
    align_uniform: bool = True,
    transfer_config: str = "full",
    transfer_classifier: str = "senteval",
    seed: int = 1111,
    whitening: int | None = None,
    align_uniform_split: str = "all",
    anisotropy: bool = True,
    backend: str = "auto",
    precision: str = "auto",
    cache: bool = True,
    cache_dir: str | None = None,
    cache_size_gb: float = 20.0,
    postprocess: str = "none",
    flow: Any = None,
    truncate_dim: int | None = None,
    sample_pairs: int | None = None,
    *,
    eval_device: str | None = None,
    files: bool = True,
    **unknown: Any,
) -> list[str]:
    """Validate evaluation options and the presence of their data files, before any model loads.

    Takes the ``eval`` config node's fields as keyword arguments (``check_eval_config(data_dir,
    **cfg.eval, select_metric=cfg.train.select_metric)``).

    Args:
        data_dir: the data root (with ``sts/`` and ``transfer/``).
        tasks: ``eval.tasks``: groups and/or task names.
        select_metric: ``train.select_metric`` to check as well (None skips it).
        batch_size: ``eval.batch_size``.
        align_uniform: ``eval.align_uniform``.
        transfer_config: ``eval.transfer_config`` (``full`` | ``fast``).
        transfer_classifier: ``eval.transfer_classifier`` (``senteval`` | ``sklearn``).
        seed: ``eval.seed``.
        whitening: ``eval.whitening`` (None or the number of kept dimensions k >= 1).
        postprocess: ``eval.postprocess`` (``none`` | ``whitening`` | ``flow``).
        flow: ``eval.flow`` (BERT-flow's options).
        align_uniform_split: ``eval.align_uniform_split``.
        anisotropy: ``eval.anisotropy``.
        backend: ``eval.backend`` (``auto`` | ``torch`` | ``onnx``).
        precision: ``eval.precision`` (``auto`` | ``fp32`` | ``bf16`` | ``tf32``; bf16 and tf32 only on hardware with their units).
        cache: ``eval.cache``.
        cache_dir: ``eval.cache_dir`` (None: the default cache folder).
        cache_size_gb: ``eval.cache_size_gb`` (> 0).
        truncate_dim: ``eval.truncate_dim`` (None or the number of leading dimensions scored, >= 1).
        sample_pairs: ``eval.sample_pairs`` (None: every pair, the full protocol; else >= 10 pairs per STS split).
        eval_device: ``train.device``, where evaluation encodes (bf16 is checked there); None or ``auto``: CUDA
            when present, else the CPU.
        files: also check the data root and every data file the options read (False: the values alone, the
            job's check before the model and the data are looked for).
        **unknown: anything else is an error (a misspelled key).

    Returns:
        The resolved task names.

    Raises:
        EvalConfigError: one line naming the key (``eval.tasks: ...``) or the missing path.
    """
    if unknown:
        valid = (
            "tasks, batch_size, align_uniform, transfer_config, transfer_classifier, seed, whitening, "
            "align_uniform_split, anisotropy, backend, precision, cache, cache_dir, cache_size_gb, postprocess, flow, "
            "truncate_dim, sample_pairs"
        )
        raise EvalConfigError(f"eval.{next(iter(unknown))}: unknown key; valid: {valid}")
    resolved = resolve_tasks(tasks)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise EvalConfigError(f"eval.batch_size: must be an integer >= 1, got {batch_size!r}")
    if transfer_config not in TRANSFER_CONFIGS:
        raise EvalConfigError(
            f"eval.transfer_config: unknown '{transfer_config}'; valid: {', '.join(TRANSFER_CONFIGS)}"
        )
    if transfer_classifier not in TRANSFER_CLASSIFIERS:
        raise EvalConfigError(
            f"eval.transfer_classifier: unknown '{transfer_classifier}'; valid: {', '.join(TRANSFER_CLASSIFIERS)}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise EvalConfigError(f"eval.seed: must be an integer >= 0, got {seed!r}")
    if whitening is not None and (
        isinstance(whitening, bool) or not isinstance(whitening, int) or whitening < 1
    ):
        raise EvalConfigError(
            f"eval.whitening: must be null or the number of kept dimensions >= 1, got {whitening!r}"
        )
    if truncate_dim is not None and (isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or truncate_dim < 1):
        raise EvalConfigError(f"eval.truncate_dim: must be null or a number of dimensions >= 1, got {truncate_dim!r}")
    if sample_pairs is not None and (isinstance(sample_pairs, bool) or not isinstance(sample_pairs, int)
                                     or sample_pairs < 10):
        raise EvalConfigError(f"eval.sample_pairs: must be null (every pair) or a number of pairs >= 10, "
                              f"got {sample_pairs!r}")
    try:
        flow_options = check_postprocess(postprocess, whitening, flow)
    except ValueError as err:
        raise EvalConfigError(str(err)) from err
    if align_uniform_split not in GEOMETRY_SPLITS:
        raise EvalConfigError(
            f"eval.align_uniform_split: unknown '{align_uniform_split}'; valid: {', '.join(GEOMETRY_SPLITS)}"
        )
    from cl_bench.models.inference import (  # torch: imported only here
        InferenceConfigError,
        check_encoding_options,
    )

    try:
        check_encoding_options(backend, precision, cache, cache_dir, cache_size_gb, eval_device)
    except InferenceConfigError as err:
        raise EvalConfigError(str(err)) from err
    if select_metric is not None and select_metric not in SELECT_METRICS:
        raise EvalConfigError(
            f"train.select_metric: unknown '{select_metric}'; valid: {', '.join(SELECT_METRICS)}"
        )
    if not files:
        return resolved
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise EvalConfigError(f"{root}: missing data root (a folder with sts/ and transfer/); {DATA_HINT}")
    files = required_files(resolved, align_uniform, anisotropy, align_uniform_split,
                           fits_per_task(postprocess, flow_options))
    if select_metric is not None:
        files += dev_required_files(select_metric)
    for relative in dict.fromkeys(files):
        path = root / relative
        if not path.is_file():
            owner = next((name for name in resolved if relative in TASKS[name].files()), None)
            if owner is not None and owner not in BUILTIN:  # cl-bench-data knows only the built-in tasks' files
                raise EvalConfigError(f"{path}: missing data file of evaluation task '{owner}' (not a built-in "
                                      "task: put its files in the data root)")
            raise EvalConfigError(f"{path}: missing data file; {DATA_HINT}")
    return resolved
