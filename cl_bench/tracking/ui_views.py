"""Saved views of MLflow's UI: the runs table and the chart view a printed URL opens on.

MLflow 3.17's UI (its ``server/js`` bundle) reads a view from an experiment tag
``mlflow.sharedViewState.<key>`` when the URL carries ``viewStateShareKey=<key>`` and no search facet of its own
(``searchFilter``, ``orderByKey``, …). The tag holds a saved view: ``{"name", "createdAt", "updatedAt", "state"}``,
``state`` a JSON text with the search facets (``searchFilter``, ``orderByKey``, ``orderByAsc``) and the UI state
(``selectedColumns``, ``compareRunCharts``, ``compareRunSections``, ``hideEmptyCharts``…); the UI lists it by
``name`` among the experiment's views. What the UI does not take from a saved view: which parent rows are
expanded (``runsExpanded``, kept in the browser only), so a sweep's view filters its children, which then show as
rows of their own. ``compareRunsMode=CHART`` in the URL opens the chart view of the same page.
Checked in headless Chromium: ``tests/commands/test_mlflow_ui.py``.

Column keys are the UI's: ``metrics.`NAME```, ``params.`NAME```, ``attributes.`Dataset```.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from cl_bench.tracking.metric_names import HEADLINE_METRICS, parse_name
from cl_bench.tracking.mlflow_logger import ui_url

#: the experiment tag prefix of a saved view (MLflow's UI constant)
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
#: the URL parameter naming the saved view to open
VIEW_URL_PARAM = "viewStateShareKey"
#: the attribute columns kept after cl-bench's: where the data and the model show (MLflow's defaults less Source)
ATTRIBUTE_COLUMNS = ("attributes.`Dataset`", "attributes.`Models`")


def logged_name(name: str, logged: Iterable[str]) -> str | None:
    """``name`` as the runs logged it: the name itself (``sts/stsb``), the same figure on a sample
    (``sts/stsb.sample300``: :func:`~cl_bench.tracking.metric_names.parse_name`), else the flat name of runs logged
    before the sections (``stsb``); None when none was logged."""
    logged = sorted(set(logged))
    if name in logged:
        return name
    wanted = parse_name(name)
    same = [n for n in logged if (parse_name(n).section, parse_name(n).key) == (wanted.section, wanted.key)]
    return same[0] if same else None


def headline_columns(logged: Iterable[str], first: str | None = None) -> list[str]:
    """The headline figures (:data:`HEADLINE_METRICS`) under the names the runs logged, ``first`` (the sort key)
    first."""
    logged = list(logged)
    names = [n for n in (logged_name(m, logged) for m in HEADLINE_METRICS) if n is not None]
    if first is not None:
        names = [first, *(n for n in names if n != first)]
    return names


def runs_view_state(metrics: Sequence[str], params: Sequence[str] = (), order_by: str | None = None,
                    search_filter: str = "") -> dict[str, Any]:
    """The runs table's state: ``params`` then ``metrics`` as its columns, sorted by ``order_by`` (descending:
    every headline figure but uniformity is higher-is-better, and the sort key is a selection figure)."""
    columns = [*(f"params.`{p}`" for p in params), *(f"metrics.`{m}`" for m in metrics), *ATTRIBUTE_COLUMNS]
    state: dict[str, Any] = {"searchFilter": search_filter, "selectedColumns": columns, "columnOrder": columns}
    if order_by is not None:
        state.update(orderByKey=f"metrics.`{order_by}`", orderByAsc=False)
    return state


def charts_view_state(metrics: Sequence[str], params: Sequence[str], order_by: str | None = None,
                      search_filter: str = "") -> dict[str, Any]:
    """The chart view's state: first a section with the parallel-coordinates plot of ``params`` (the swept keys)
    against ``metrics`` and one bar chart per metric; MLflow adds its own charts of the other metrics after it."""
    section = _uuid("section", *params, *metrics)
    card = {"runsCountToCompare": 100, "metricSectionId": section, "deleted": False, "isGenerated": False}
    charts = [{**card, "uuid": _uuid("parallel", *params, *metrics), "type": "PARALLEL", "selectedParams": list(params),
               "selectedMetrics": list(metrics), "showAllRuns": True}]
    charts += [{**card, "uuid": _uuid("bar", m), "type": "BAR", "metricKey": m, "displayName": m} for m in metrics]
    sections = [{"uuid": section, "name": "cl-bench: swept keys and headline figures", "display": True,
                 "isReordered": False, "deleted": False, "isGenerated": False}]
    state = {"searchFilter": search_filter, "compareRunCharts": charts, "compareRunSections": sections,
             "isAccordionReordered": True, "hideEmptyCharts": True, "runsHiddenMode": "SHOW_ALL"}
    if order_by is not None:
        state.update(orderByKey=f"metrics.`{order_by}`", orderByAsc=False)
    return state


def save_view(client: Any, experiment_id: str, name: str, state: dict[str, Any], key: str | None = None) -> str:
    """Store ``state`` as the experiment's saved view ``name``; returns its key (for :func:`view_query`).

    ``key`` None: a digest of the name and state, so the same view saved again (every single run of an
    experiment) overwrites its tag rather than adding one.
    """
    text = json.dumps(state, sort_keys=True, separators=(",", ":"))
    key = key or "clb-" + hashlib.sha1(f"{name}\n{text}".encode()).hexdigest()[:12]
    now = int(time.time() * 1000)
    envelope = {"name": name, "createdAt": now, "updatedAt": now, "state": text}
    client.set_experiment_tag(experiment_id, VIEW_TAG_PREFIX + key, json.dumps(envelope, separators=(",", ":")))
    return key


def view_query(key: str, charts: bool = False) -> str:
    """The URL query that opens saved view ``key`` (its chart view with ``charts``)."""
    return f"{VIEW_URL_PARAM}={key}" + ("&compareRunsMode=CHART" if charts else "")


def children_filter(parent_run_id: str) -> str:
    """The runs-table search that lists a sweep's child runs."""
    return f"tags.`mlflow.parentRunId` = '{parent_run_id}'"


def _uuid(*parts: str) -> str:
    """A stable id for a chart or section (the UI only needs it unique in the view)."""
    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:16]


def runs_table_url(client: Any, tracking_uri: str, run_id: str, order_by: Sequence[str]) -> str:
    """Save the experiment's view of a single run's kind and return the runs-table URL that opens on it: the
    headline figures as columns, sorted by the first of ``order_by`` that the run logged (its selection figure,
    ``select/best_stsb_dev``; the flat name of older runs is found too). Children of sweeps stay under their
    parent run, as the UI shows them."""
    run = client.get_run(run_id)
    logged = list(run.data.metrics)
    order = next((n for n in (logged_name(k, logged) for k in order_by) if n is not None), None)
    state = runs_view_state(headline_columns(logged, first=order), order_by=order)
    key = save_view(client, run.info.experiment_id, f"cl-bench: headline figures by {order or 'start time'}", state)
    return f"{ui_url(tracking_uri, run.info.experiment_id)}&{view_query(key)}"
