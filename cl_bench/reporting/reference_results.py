"""The papers' ablation figures that ``cl-bench-report`` compares to (data: resources/paper_results.yaml).

Each :class:`AblationSpec` says which runs belong to one of the papers' ablation tables (by the
``experiment`` tag and fixed knobs), how to tell its points apart (params or tags of the run) and
what the paper reported for each point, with the source table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from cl_bench.utils.conf_dir import CONF_DIR

RESOURCE = "paper_results.yaml"
_SPEC_KEYS = {"title", "source", "paper_setting", "paper_metric", "experiments", "metrics", "where", "assume", "points",
              "paper_run"}


class ReferenceDataError(ValueError):
    """The reference-figures file is malformed; the message names the file and the key."""


def parse_value(value: Any) -> Any:
    """A param as MLflow stores it (a string) to a comparable value: number, bool, None or str."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value).strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null", ""):
        return None
    try:
        return float(text)
    except ValueError:
        return text


def values_equal(a: Any, b: Any) -> bool:
    """Equality after :func:`parse_value`: numbers with a relative tolerance, strings case-insensitive."""
    a, b = parse_value(a), parse_value(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    return a == b


def run_value(run: Mapping[str, Any], key: str, assume: Mapping[str, Any] | None = None) -> Any:
    """The value of ``key`` for one run row of ``mlflow.search_runs``.

    ``tags.<name>`` reads a tag, anything else a param (``params.<key>``); a missing or empty
    value falls back to ``assume[key]`` (None when not given).
    """
    column = key if key.startswith(("tags.", "metrics.")) else f"params.{key}"
    value = run.get(column)
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "n/a":  # n/a: inert in that run
        return (assume or {}).get(key)
    return value


@dataclass(frozen=True)
class Point:
    """One row of a paper's ablation table.

    Attributes:
        label: the row's name as the report prints it.
        match: params (or ``tags.<name>``) and their values that identify the row's runs.
        paper: the published figure (None when the paper has none).
    """

    label: str
    match: dict[str, Any]
    paper: float | None


@dataclass(frozen=True)
class AblationSpec:
    """One of the papers' ablation tables and how cl-bench runs map onto it."""

    name: str
    title: str
    source: str
    paper_setting: str
    paper_metric: str
    experiments: tuple[str, ...]
    metrics: tuple[str, ...]
    points: tuple[Point, ...]
    where: dict[str, Any] = field(default_factory=dict)
    assume: dict[str, Any] = field(default_factory=dict)
    #: the paper's run: ``encoder``, ``steps``, ``batch`` (what a reproduction is compared on; may be empty)
    paper_run: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        """Every key that tells this table's points apart, in first-use order."""
        return list(dict.fromkeys(k for point in self.points for k in point.match))

    def selects(self, run: Mapping[str, Any]) -> bool:
        """Whether the run's fixed knobs are those of the table (``where``)."""
        return all(values_equal(run_value(run, k, self.assume), v) for k, v in self.where.items())

    def point_of(self, run: Mapping[str, Any]) -> Point | None:
        """The table row the run reproduces, or None when it matches none."""
        return next((point for point in self.points
                     if all(values_equal(run_value(run, k, self.assume), v) for k, v in point.match.items())), None)

    def other_label(self, run: Mapping[str, Any]) -> str:
        """A label for a run that matches no row: its values of the table's keys."""
        values = ", ".join(f"{k}={run_value(run, k, self.assume)}" for k in self.keys)
        return f"other ({values})"


def point_overrides(name: str) -> dict[str, Any]:
    """The keys a grid point (``conf/experiment/points/<name>.yaml``) sets, flattened (``pooler.name``...).

    The point file is the one place a point's settings are written: the sweep applies it and the report
    identifies the point's runs by the same keys. The paper tables name cl-bench's own points, so the file is read
    from cl-bench's ``conf/`` (:data:`cl_bench.utils.conf_dir.CONF_DIR`), not a user's search path.
    """
    import pandas as pd

    path = CONF_DIR / "experiment" / "points" / f"{name}.yaml"
    if not path.is_file():
        raise ReferenceDataError(f"point {name}: no conf/experiment/points/{name}.yaml")
    return pd.json_normalize(yaml.safe_load(path.read_text()) or {}, sep=".").iloc[0].to_dict()


def _spec(name: str, node: Any, where_from: str) -> AblationSpec:
    def fail(message: str) -> ReferenceDataError:
        return ReferenceDataError(f"{where_from}: ablations.{name}{message}")

    if not isinstance(node, dict):
        raise fail(": expected a mapping")
    unknown = set(node) - _SPEC_KEYS
    if unknown:
        raise fail(f": unknown keys {', '.join(sorted(unknown))}")
    for key in ("title", "source", "paper_setting", "paper_metric", "experiments", "metrics", "points"):
        if not node.get(key):
            raise fail(f".{key}: missing")
    points = []
    for i, point in enumerate(node["points"]):
        if isinstance(point, dict) and point.get("point"):
            point = {**point, "match": point_overrides(str(point["point"]))}
        if not isinstance(point, dict) or not point.get("label") or not isinstance(point.get("match"), dict):
            raise fail(f".points[{i}]: needs a label and a match mapping (or a point: name)")
        paper = point.get("paper")
        if paper is not None and not isinstance(paper, (int, float)):
            raise fail(f".points[{i}].paper: expected a number or null, got {paper!r}")
        points.append(Point(str(point["label"]), dict(point["match"]), None if paper is None else float(paper)))
    return AblationSpec(
        name=name,
        **{key: str(node[key]) for key in ("title", "source", "paper_setting", "paper_metric")},
        experiments=tuple(str(e) for e in node["experiments"]),
        metrics=tuple(str(m) for m in node["metrics"]),
        points=tuple(points),
        **{key: dict(node.get(key) or {}) for key in ("where", "assume", "paper_run")},
    )


def load_ablations(path: str | Path | None = None) -> dict[str, AblationSpec]:
    """Read the ablation tables (the packaged ``paper_results.yaml`` unless ``path`` is given).

    Raises:
        ReferenceDataError: on a malformed file, naming the file and the key.
    """
    if path is None:
        text = resources.files("cl_bench").joinpath("resources", RESOURCE).read_text(encoding="utf-8")
        where_from = f"cl_bench/resources/{RESOURCE}"
    else:
        text, where_from = Path(path).read_text(encoding="utf-8"), str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ReferenceDataError(f"{where_from}: not valid YAML ({err})") from err
    if not isinstance(data, dict) or not isinstance(data.get("ablations"), dict):
        raise ReferenceDataError(f"{where_from}: expected a top-level 'ablations' mapping")
    return {name: _spec(name, node, where_from) for name, node in data["ablations"].items()}


def specs_for(experiments: Sequence[str], ablations: Mapping[str, AblationSpec]) -> list[AblationSpec]:
    """The tables that runs of the given ``experiment`` presets belong to, in file order."""
    wanted = set(experiments)
    return [spec for spec in ablations.values() if wanted & set(spec.experiments)]
