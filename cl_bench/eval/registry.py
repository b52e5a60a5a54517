"""The evaluation-task registry: one entry per task, from which everything else derives.

An :class:`EvalTask` says which files a task reads (per part: a split or a sub-dataset), how a part
is read, how the task is scored, which metric keys it reports, which averages it enters, and its
column in the printed table. From the registry come the ``eval.tasks`` names and groups, the
required-files check (:mod:`cl_bench.eval.tasks`), what :func:`cl_bench.eval.evaluate` loads and
scores, the averages (``sts_avg``, ``transfer_avg``, ...), the SimCSE-style table, ``cl-bench
list`` and the model card's metric groups (``cl-bench-export``).

Readers and scorers are named by dotted paths and imported when first used, so this module loads
nothing heavy; a task from a user's folder has the same shape (``eval_task/<name>.yaml``, see
:func:`task_from_yaml`).

* reader: ``reader(*paths) -> data`` for one part, the paths in the order the entry lists them
  (``ScoredPairs`` for an STS-style task, ``LabeledTexts``/``LabeledPairs`` for a transfer task).
* scorer: ``scorer(name, parts, embed, options, **scorer_args) -> {metric: value}``, with ``parts``
  ``{part name: data}`` and ``options`` a :class:`ScoreOptions`.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: task kinds: which evaluation options a task's scorer reads (``sts``: the post-processing;
#: ``transfer``: also ``eval.transfer_config``, ``transfer_classifier`` and ``seed``)
KINDS: tuple[str, ...] = ("sts", "transfer")


@dataclass(frozen=True)
class ScoreOptions:
    """The evaluation options a scorer may read.

    Attributes:
        postprocess: a fitted-per-task whitening or flow (:mod:`cl_bench.eval.postprocess`), or None.
        transfer_config: SentEval's ``full`` (10 folds) or ``fast`` (5 folds) classifier configuration.
        seed: SentEval's seed (1111).
        classifier: ``senteval`` or ``sklearn``.
        pair_scores: where STS scorers put each scored pair's similarity and gold score
            (``{task: {part: (system, gold)}}``, :func:`cl_bench.eval.pair_scores.save_pair_scores`); None: not kept.
    """

    postprocess: Any = None
    transfer_config: str = "full"
    seed: int = 1111
    classifier: str = "senteval"
    pair_scores: dict[str, Any] | None = None


@dataclass(frozen=True)
class EvalTask:
    """One evaluation task.

    Attributes:
        name: the ``eval.tasks`` name and the task's headline metric key.
        header: its column header in the printed table.
        group: the ``eval.tasks`` group that includes it and the table row it is printed in; the row
            ends with the average ``<group>_avg`` when tasks declare one.
        kind: ``sts`` or ``transfer`` (:data:`KINDS`).
        parts: part (split or sub-dataset) -> its files relative to the data root, in the reader's
            argument order.
        reader: dotted path of the function that reads one part's files.
        scorer: dotted path of the function that scores the task.
        metrics: the metric keys the scorer reports (``{name}``: the headline).
        averages: average key -> the metric of this task that enters it; an average is reported
            when every task declaring it was scored.
        scored_parts: the parts a final evaluation scores (empty: all); the others are read only
            to fit a per-task post-processing (whitening, flow).
        dev_parts: the parts a dev evaluation (model selection) reads (empty: all).
        scorer_args: extra keyword arguments of the scorer (a transfer task's protocol, classes).
    """

    name: str
    header: str
    group: str
    kind: str
    parts: Mapping[str, tuple[str, ...]]
    reader: str
    scorer: str
    metrics: tuple[str, ...]
    averages: Mapping[str, str] = field(default_factory=dict)
    scored_parts: tuple[str, ...] = ()
    dev_parts: tuple[str, ...] = ()
    scorer_args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"evaluation task '{self.name}'"
        if not self.name or self.name != self.name.strip().lower() or groups().get(self.name, (self.name,)) != (self.name,):
            raise ValueError(f"{where}: the name must be lower case and not a group name")
        if self.group in TASKS and self.group != self.name:
            raise ValueError(f"{where}: its group '{self.group}' is a task name")
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind '{self.kind}' is not one of {', '.join(KINDS)}")
        if not self.parts or any(not files for files in self.parts.values()):
            raise ValueError(f"{where}: parts must map each part name to its files")
        for key in (*self.scored_parts, *self.dev_parts):
            if key not in self.parts:
                raise ValueError(f"{where}: '{key}' is not one of its parts ({', '.join(self.parts)})")
        unknown = [m for m in self.averages.values() if m not in self.metrics]
        if unknown:
            raise ValueError(f"{where}: averages take {unknown[0]}, which is not one of its metrics")

    def files(self, parts: Iterable[str] | None = None) -> list[str]:
        """The files (relative to the data root) of ``parts`` (None: all), in entry order."""
        chosen = self.parts if parts is None else set(parts)
        return [path for part, files in self.parts.items() if part in chosen for path in files]

    def final_parts(self, fit_per_task: bool = False) -> tuple[str, ...]:
        """The parts a final evaluation reads: the scored ones, or all when a post-processing is fitted per task."""
        if fit_per_task or not self.scored_parts:
            return tuple(self.parts)
        return tuple(part for part in self.parts if part in self.scored_parts)

    def dev_read_parts(self) -> tuple[str, ...]:
        """The parts a dev evaluation reads."""
        return tuple(part for part in self.parts if not self.dev_parts or part in self.dev_parts)


#: the registry, in canonical order (the order of ``eval.tasks`` expansion, the table and the averages)
TASKS: dict[str, EvalTask] = {}


def register_task(task: EvalTask, replace: bool = False) -> EvalTask:
    """Add ``task`` to the registry (a name already there is an error unless ``replace``)."""
    if task.name in TASKS and not replace:
        raise ValueError(f"evaluation task '{task.name}' is already registered")
    TASKS[task.name] = task
    return task


def groups() -> dict[str, tuple[str, ...]]:
    """``eval.tasks`` group -> its task names, in registry order."""
    found: dict[str, list[str]] = {}
    for task in TASKS.values():
        found.setdefault(task.group, []).append(task.name)
    return {name: tuple(names) for name, names in found.items()}


def task_names(kind: str | None = None) -> tuple[str, ...]:
    """Every registered task (of ``kind``, when given), in registry order."""
    return tuple(name for name, task in TASKS.items() if kind is None or task.kind == kind)


def get_task(name: str) -> EvalTask:
    """The registered task ``name`` (``ValueError`` naming the valid ones otherwise)."""
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"not an evaluation task: '{name}' (registered: {', '.join(TASKS)})") from None


def average_members() -> dict[str, list[str]]:
    """Average key -> the metrics that enter it, in registry order."""
    members: dict[str, list[str]] = {}
    for task in TASKS.values():
        for average, metric in task.averages.items():
            members.setdefault(average, []).append(metric)
    return members


def tasks_in_average(average: str) -> list[str]:
    """The tasks that declare ``average``."""
    return [task.name for task in TASKS.values() if average in task.averages]


def uses_transfer(tasks: Iterable[str]) -> bool:
    """Whether any of these task or group names evaluates a transfer task (one that reads ``eval.transfer_*``)."""
    task_groups = groups()
    names = [str(t).strip().lower() for t in tasks]
    expanded = [n for name in names for n in task_groups.get(name, (name,))]
    return any(name in TASKS and TASKS[name].kind == "transfer" for name in expanded)


#: the ``eval.tasks`` prefix of an MTEB task (``mteb:STS12``; cl_bench.eval.mteb runs them)
MTEB_PREFIX = "mteb:"


def is_mteb_task(name: str) -> bool:
    """Whether an ``eval.tasks`` entry names an MTEB task (``mteb:<TaskName>``)."""
    return str(name).startswith(MTEB_PREFIX)


def split_tasks(tasks: Iterable[str]) -> tuple[list[str], list[str]]:
    """Separate ``eval.tasks`` into cl-bench's own entries and MTEB task names (prefix removed)."""
    tasks = list(tasks)
    own = [name for name in tasks if not is_mteb_task(name)]
    return own, [str(name).removeprefix(MTEB_PREFIX) for name in tasks if is_mteb_task(name)]


def complete_averages(results: Mapping[str, float]) -> dict[str, float]:
    """Every declared average whose metrics are all in ``results`` (their plain mean)."""
    import numpy as np

    return {
        average: float(np.mean([results[m] for m in metrics]))
        for average, metrics in average_members().items()
        if all(m in results for m in metrics)
    }


def table_rows() -> list[tuple[tuple[str, str], ...]]:
    """The printed table's rows: per group, ``(header, metric key)`` of its tasks and then ``("Avg.", <group>_avg)``."""
    declared = average_members()
    rows = []
    for group, names in groups().items():
        columns = [(TASKS[name].header, name) for name in names]
        if f"{group}_avg" in declared:
            columns.append(("Avg.", f"{group}_avg"))
        rows.append(tuple(columns))
    return rows


def metric_task(key: str) -> EvalTask | None:
    """The task a metric key belongs to (its name, ``<name>_...``, or an average it enters), else None."""
    return next((task for task in TASKS.values()
                 if key == task.name or key.startswith(f"{task.name}_") or key in task.averages), None)


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------
@functools.cache
def resolve(dotted: str) -> Callable[..., Any]:
    """The function a dotted path names (``package.module.function``)."""
    module, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"cannot import '{dotted}': {err}") from err


@functools.lru_cache(maxsize=256)
def _read(reader: str, paths: tuple[str, ...]) -> Any:
    return resolve(reader)(*paths)


def load_task(data_dir: str | Path, name: str, parts: Sequence[str] | None = None) -> dict[str, Any]:
    """The parsed parts of a task (cached per file, so repeated dev evaluations only re-encode).

    Args:
        data_dir: the data root.
        name: a registered task.
        parts: which parts (None: all), returned in entry order.

    Returns:
        Part name -> what the task's reader returns.
    """
    task = get_task(name)
    root = Path(data_dir).expanduser().resolve()
    chosen = list(task.parts) if parts is None else [p for p in task.parts if p in parts]
    missing = [p for p in (parts or ()) if p not in task.parts]
    if missing:
        raise ValueError(f"evaluation task '{name}' has no part '{missing[0]}' (parts: {', '.join(task.parts)})")
    return {part: _read(task.reader, tuple(str(root / f) for f in task.parts[part])) for part in chosen}


def task_sentences(parts: Mapping[str, Any]) -> list[str]:
    """Every sentence of a task's parts (duplicates kept): a part's ``texts``, or its ``sent1`` then ``sent2``."""
    texts: list[str] = []
    for part in parts.values():
        texts += list(part.texts) if hasattr(part, "texts") else [*part.sent1, *part.sent2]
    return texts


def score_task(name: str, parts: Mapping[str, Any], embed: Callable[..., Any], options: ScoreOptions) -> dict[str, float]:
    """Score a task's loaded parts with its scorer."""
    task = get_task(name)
    return resolve(task.scorer)(name, dict(parts), embed, options, **task.scorer_args)


# ------------------------------------------------------------------------------------------------
# A task from a user's folder: eval_task/<name>.yaml
# ------------------------------------------------------------------------------------------------
def task_from_yaml(path: str | Path) -> EvalTask:
    """An :class:`EvalTask` from a YAML file whose keys are its fields (``name`` defaults to the file's stem).

    Raises:
        ValueError: one line naming the file and the key.
    """
    import yaml

    path = Path(path)
    node = yaml.safe_load(path.read_text()) or {}
    fields_ = set(EvalTask.__dataclass_fields__)
    unknown = [key for key in node if key not in fields_]
    if unknown:
        raise ValueError(f"{path}: unknown key '{unknown[0]}'; valid: {', '.join(sorted(fields_))}")
    node.setdefault("name", path.stem)
    node.setdefault("header", node["name"].upper())
    node.setdefault("metrics", [node["name"]])
    missing = [key for key in ("group", "kind", "parts", "reader", "scorer") if key not in node]
    if missing:
        raise ValueError(f"{path}: missing key '{missing[0]}'")
    node["parts"] = {str(part): tuple(files if isinstance(files, list) else [files])
                     for part, files in (node["parts"] or {}).items()}
    for key in ("metrics", "scored_parts", "dev_parts"):
        if key in node:
            node[key] = tuple(node[key])
    try:
        return EvalTask(**node)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {err}") from err


def register_folder(folder: str | Path) -> list[str]:
    """Register every ``<folder>/eval_task/*.yaml`` (a user's ``hydra.searchpath`` folder).

    Re-registering the same folder replaces its tasks. Returns the task names.
    """
    names = []
    for path in sorted((Path(folder) / "eval_task").glob("*.yaml")):
        task = task_from_yaml(path)
        builtin = BUILTIN.get(task.name)
        if builtin is not None:
            raise ValueError(f"{path}: '{task.name}' is a built-in evaluation task; choose another name")
        names.append(register_task(task, replace=True).name)
    return names


# ------------------------------------------------------------------------------------------------
# The built-in tasks: SentEval's STS and transfer tasks, as SimCSE reports them
# ------------------------------------------------------------------------------------------------
#: SentEval's sub-datasets per STS year (STS13 without the licence-restricted SMT subset).
STS_SUBSETS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}

#: STS12–16: task name -> (SentEval year name, folder under the data root).
STS_YEAR_FOLDERS: dict[str, tuple[str, str]] = {
    f"sts1{year}": (f"STS1{year}", f"sts/STS1{year}-en-test") for year in "23456"
}
_SENTEVAL = "cl_bench.data.senteval"
_TRANSFER = "cl_bench.eval.transfer"


def _sts_year(name: str) -> EvalTask:
    year, folder = STS_YEAR_FOLDERS[name]
    subsets = STS_SUBSETS[year]
    return EvalTask(
        name=name, header=year, group="sts", kind="sts",
        parts={s: (f"{folder}/STS.input.{s}.txt", f"{folder}/STS.gs.{s}.txt") for s in subsets},
        reader=f"{_SENTEVAL}.read_sts_pair_files", scorer="cl_bench.eval.sts.score_sts_subsets",
        metrics=(name, f"{name}_mean", f"{name}_wmean"), averages={"sts_avg": name},
    )


def _sts_splits(name: str, header: str, folder: str, files: dict[str, str], reader: str) -> EvalTask:
    return EvalTask(
        name=name, header=header, group="sts", kind="sts",
        parts={split: (f"{folder}/{file}",) for split, file in files.items()},
        reader=f"{_SENTEVAL}.{reader}", scorer="cl_bench.eval.sts.score_sts_splits",
        metrics=(name, f"{name}_dev"), averages={"sts_avg": name, "sts_dev_avg": f"{name}_dev"},
        scored_parts=("dev", "test"), dev_parts=("dev",),
    )


def _transfer(
    name: str, header: str, parts: dict[str, tuple[str, ...]], reader: str, protocol: str,
    classes: int = 2, f1: bool = False,
) -> EvalTask:
    return EvalTask(
        name=name, header=header, group="transfer", kind="transfer", parts=parts,
        reader=f"{_TRANSFER}.{reader}", scorer=f"{_TRANSFER}.score_transfer_task",
        metrics=(name, f"{name}_dev", *([f"{name}_f1"] if f1 else [])),
        averages={"transfer_avg": name, "transfer_dev_avg": f"{name}_dev"},
        scorer_args={"protocol": protocol, "n_classes": classes, "f1": f1},
    )


def _binary(name: str, header: str, positive: str, negative: str) -> EvalTask:
    return _transfer(name, header, {"all": (positive, negative)}, "read_binary_ordered", "inner_kfold")


_SST = "transfer/SST/binary/sentiment"
_BUILTIN_TASKS: tuple[EvalTask, ...] = (
    *(_sts_year(name) for name in STS_YEAR_FOLDERS),
    _sts_splits("stsb", "STS-B", "sts/STSBenchmark",
                {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}, "read_stsb_split"),
    _sts_splits("sickr", "SICK-R", "sts/SICK",
                {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"},
                "read_sick_split"),
    _binary("mr", "MR", "transfer/MR/rt-polarity.pos", "transfer/MR/rt-polarity.neg"),
    _binary("cr", "CR", "transfer/CR/custrev.pos", "transfer/CR/custrev.neg"),
    # SentEval passes the objective sentences as the positive class (label 1).
    _binary("subj", "SUBJ", "transfer/SUBJ/subj.objective", "transfer/SUBJ/subj.subjective"),
    _binary("mpqa", "MPQA", "transfer/MPQA/mpqa.pos", "transfer/MPQA/mpqa.neg"),
    _transfer("sst2", "SST-2", {split: (f"{_SST}-{split}",) for split in ("train", "dev", "test")},
              "read_sst_ordered", "split"),
    _transfer("trec", "TREC", {"train": ("transfer/TREC/train_5500.label",), "test": ("transfer/TREC/TREC_10.label",)},
              "read_trec_ordered", "kfold", classes=6),
    _transfer("mrpc", "MRPC", {"train": ("transfer/MRPC/msr_paraphrase_train.txt",),
                               "test": ("transfer/MRPC/msr_paraphrase_test.txt",)},
              "read_mrpc_ordered", "kfold", f1=True),
)
for _task in _BUILTIN_TASKS:
    register_task(_task)
#: the built-in tasks (a user's task may not take their names)
BUILTIN: dict[str, EvalTask] = dict(TASKS)
