"""What can be chosen: the options of every config group, from cl-bench's ``conf/`` and the user's
own folders (``hydra.searchpath``), and the ``cl-bench list`` listing.

This is the one place that knows where config options live; the CLI's early checks, the
validation messages and ``cl-bench list`` all ask it.
"""

from __future__ import annotations

import copy
import functools
import importlib
import os
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from cl_bench.eval.registry import TASKS, groups, register_folder
from cl_bench.specs import spec_for
from cl_bench.utils.conf_dir import CONF_DIR
from cl_bench.utils.overrides import parsed_overrides

#: groups a user chooses with ``group=option``
GROUPS = ("model", "pooler", "method", "augmentation", "loss", "data", "train", "eval", "logger", "paths", "experiment")
#: subfolders that hold building blocks of other options, not options of their own
_INTERNAL = {"experiment": ("points/",), "augmentation": ("simcse_table1/",)}

_user_dirs: list[Path] = []


def use_search_path(entries: Iterable[str]) -> None:
    """Register the user's config folders (``hydra.searchpath`` entries, ``file://`` or plain paths).

    Each folder is also put on ``sys.path`` (and ``PYTHONPATH``, for launcher subprocesses), so a
    ``_target_`` naming a module in the folder imports without installing anything, and its
    ``eval_task/*.yaml`` evaluation tasks join the registry (:func:`cl_bench.eval.registry.register_folder`).

    Raises:
        ValueError: an evaluation task's YAML is invalid (one line naming the file).
    """
    for entry in entries:
        if entry.startswith("pkg://"):
            continue
        folder = Path(entry[len("file://"):] if entry.startswith("file://") else entry).resolve()
        if folder in _user_dirs:
            continue
        _user_dirs.append(folder)
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
        register_folder(folder)


def search_path_from_argv(argv: Sequence[str]) -> list[str]:
    """The entries of a ``hydra.searchpath=[a,b]`` command-line override."""
    for _, override in parsed_overrides(argv):
        if override.key_or_group == "hydra.searchpath":
            value = override.value()
            return [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return []


def conf_dirs() -> list[Path]:
    """cl-bench's conf/ first, then the user's folders."""
    return [CONF_DIR, *_user_dirs]


def options(group: str, internal: bool = False) -> dict[str, Path]:
    """``{option name: YAML path}`` of a config group (later folders add to earlier ones)."""
    found: dict[str, Path] = {}
    for root in conf_dirs():
        folder = root / group
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.yaml")):
            name = path.relative_to(folder).with_suffix("").as_posix()
            if internal or not name.startswith(_INTERNAL.get(group, ())):
                found[name] = path
    return found


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML option file as a dict (empty for an empty file; a fresh copy: the caller may change it).

    Parsed once per file version: a sweep's preflight and the rejection messages read the same option files for
    every job (an edited file has a new modification time and is parsed again)."""
    stat = path.stat()
    return copy.deepcopy(_parsed_yaml(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=1024)
def _parsed_yaml(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def summary_line(path: Path, width: int | None = None) -> str:
    """What a YAML option is: its leading comment's first sentence, whole (``width``: cut to that many
    characters; ``cl-bench list`` prints it whole, an abbreviation such as "e.g." ends no sentence)."""
    text = []
    for line in path.read_text().splitlines():
        if line.startswith("# @package"):
            continue
        if not line.startswith("#"):
            break
        text.append(line.lstrip("# ").strip())
    joined = " ".join(text)
    sentence = re.split(r"(?<!e\.g)(?<!i\.e)(?<!\bal)(?<!\bcf)(?<!\bvs)(?<!\bp)\.\s+", joined)[0].rstrip(".")
    return sentence if width is None or len(sentence) <= width else sentence[: width - 1] + "…"


def import_target(target: str) -> Any:
    module, _, attr = target.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def loss_kind_of(path: Path) -> str | None:
    """The kind of a loss option (:attr:`cl_bench.specs.LossSpec.kind`; None when its spec cannot be found)."""
    spec = _spec(read_yaml(path).get("_target_"))
    return None if spec is None else spec.kind


def _spec(target: object) -> Any:
    """The spec of a ``_target_`` (:func:`cl_bench.specs.spec_for`), None when none can be imported."""
    try:
        return spec_for(str(target))
    except (ImportError, ValueError):
        return None


def method_spec(method: str) -> Any:
    """The spec class of ``method=NAME`` (its YAML's ``_target_``'s), None when it has none or none can be imported."""
    path = options("method").get(method)
    return None if path is None else _spec(read_yaml(path).get("_target_"))


def loss_kinds() -> dict[str, str | None]:
    """``{loss option: its function's kind}`` for every loss option."""
    return {name: loss_kind_of(path) for name, path in options("loss").items()}


def losses_of_kinds(kinds: Sequence[str], known: dict[str, str | None] | None = None) -> list[str]:
    """Loss options whose function is of one of ``kinds`` (``known``: :func:`loss_kinds`, when already read)."""
    return [name for name, kind in (loss_kinds() if known is None else known).items() if kind in kinds]


def method_default(method: str, group: str) -> str | None:
    """The ``group`` option ``method=NAME`` brings when none is chosen: its YAML's ``override /GROUP@_group_: NAME``
    defaults entry (the one mechanism of a method's defaults), else None (the config's global default)."""
    path = options("method").get(method)
    for entry in read_yaml(path).get("defaults", []) if path is not None else []:
        if isinstance(entry, dict):
            for key, value in entry.items():
                if str(key).startswith(f"override /{group}"):
                    return str(value)
    return None


def default_loss(method: str) -> str:
    """The loss ``method=NAME`` brings when none is chosen (:func:`method_default`; the global default ``infonce``)."""
    return method_default(method, "loss") or "infonce"


def default_augmentation(method: str) -> str:
    """The augmentation ``method=NAME`` brings when none is chosen (:func:`method_default`; the global default
    ``dropout``)."""
    return method_default(method, "augmentation") or "dropout"


def method_rows() -> list[dict[str, str]]:
    """One row per method: name, groups and keys it uses, default loss, loss kinds, summary."""
    rows, kinds = [], loss_kinds()
    for name, path in options("method").items():
        node = read_yaml(path)
        cls = _spec(node.get("_target_"))  # a spec is torch-free: listing imports no torch
        if cls is None:
            rows.append({"method": name, "summary": f"no spec found for {node.get('_target_')}"})
            continue
        keys = [k for k in cls.keys() if k != "name"]  # the spec declares every key (the YAML only what it changes)
        rows.append({
            "method": name,
            "uses": ", ".join(g for g in ("loss", "augmentation", "pooler") if g in cls.uses) or "-",
            "losses": f"{'/'.join(cls.loss_kinds)}: {', '.join(losses_of_kinds(cls.loss_kinds, kinds))}",
            "default_loss": default_loss(name) or "-",
            "default_augmentation": default_augmentation(name) if "augmentation" in cls.uses else "-",
            "keys": ", ".join(f"method.{k}" for k in keys) or "-",
            "summary": cls.summary or summary_line(path),
        })
    return rows


def eval_task_lines() -> list[str]:
    """The ``cl-bench list`` section of the evaluation-task registry: groups, then one line per task."""
    lines = ["EVALUATION TASKS  (eval.tasks=[NAME or group, ...]; groups: "
             + "; ".join(f"{group} = {', '.join(names)}" for group, names in groups().items()) + ")"]
    for task in TASKS.values():
        averages = f"; averages: {', '.join(task.averages)}" if task.averages else ""
        lines.append(f"  {task.name}: {task.header} (group {task.group}, kind {task.kind}), {len(task.files())} files; "
                     f"metrics: {', '.join(task.metrics)}{averages}")
    return lines


def listing() -> str:
    """The text ``cl-bench list`` prints."""
    lines = ["METHODS  (every method also uses: dropout, batch_size, seed, model.*, data, train.*, eval.*)"]
    for row in method_rows():
        lines.append(f"  {row['method']}: {row['summary']}")
        for field in ("uses", "default_loss", "default_augmentation", "losses", "keys"):
            if field in row:
                lines.append(f"      {field.replace('_', ' ')}: {row[field]}")
    lines += eval_task_lines()
    for group, title in (("loss", "LOSSES"), ("augmentation", "AUGMENTATIONS"), ("pooler", "POOLERS"),
                         ("data", "DATA"), ("eval", "EVALUATION PRESETS"), ("experiment", "EXPERIMENT PRESETS")):
        lines.append(f"{title}  ({group}=NAME)")
        kinds = loss_kinds() if group == "loss" else {}
        for name, path in options(group).items():
            kind = f" [{kinds[name]}]" if group == "loss" else ""
            lines.append(textwrap.fill(f"{name}{kind}: {summary_line(path)}", width=118, initial_indent="  ",
                                       subsequent_indent="      "))  # whole, wrapped
    return "\n".join(lines)
