"""MLflow's UI in headless Chromium: the URL cl-bench prints opens on the runs table, not the GenAI traces page;
after a sweep, the printed runs-table URL shows the swept keys and the headline figures first, sorted by the
sweep's selection figure, and the printed chart URL opens on the swept keys against the headline figures."""

from __future__ import annotations

import html
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest
from conftest import cli_env

from cl_bench.tracking.mlflow_logger import ensure_experiment, ui_url

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _text(dom: str) -> str:
    """The page's visible text, whitespace collapsed (React's ``<!-- -->`` separators dropped)."""
    body = re.sub(r"<style.*?</style>|<script.*?</script>", "", dom.replace("<!-- -->", ""), flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def _serve(uri: str) -> tuple[subprocess.Popen, str]:
    """``mlflow ui`` on the store ``uri`` at a free port, started; (process, base URL)."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                               "--port", str(port), "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    started = time.time()
    while True:
        try:
            urllib.request.urlopen(base, timeout=5)
            return server, base
        except OSError:
            assert server.poll() is None and time.time() - started < 400, "mlflow ui did not start"
            time.sleep(2)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _render(url: str, out: Path, width: int = 1400) -> str:
    """The page's DOM after its scripts ran (and a screenshot of it in ``out``)."""
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},900",
             "--virtual-time-budget=30000"]
    subprocess.run([*flags, f"--screenshot={out}", url], capture_output=True, timeout=300)
    return subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=300).stdout


@pytest.mark.slow  # an MLflow server and Chromium (~1-3 min)
def test_printed_url_opens_on_the_runs_table(tmp_path: Path) -> None:
    if CHROMIUM is None:
        pytest.fail("no Chromium: install it with `apt-get install chromium` (Debian) to run this browser check")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment_id = ensure_experiment(uri, "cl-bench")
    client = mlflow.MlflowClient(uri)
    run_ids = []
    for dropout, score in ((0.0, 70.1), (0.1, 81.2)):
        run = client.create_run(experiment_id, run_name=f"dropout={dropout:g}")
        run_ids.append(run.info.run_id)
        client.log_param(run.info.run_id, "dropout", dropout)
        client.log_metric(run.info.run_id, "best_stsb_dev", score)
        client.set_terminated(run.info.run_id)
    server, base = _serve(uri)
    try:
        table = ui_url(base, experiment_id)
        assert table == f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
        dom = _render(table, tmp_path / "runs.png")
        assert "2 matching runs" in dom.replace("<!-- -->", "") or "matching runs" in dom
        assert "dropout=0.1" in dom and "dropout=0" in dom
        # without the switch a fresh browser lands on MLflow 3's GenAI overview, with no run in sight
        plain = _render(f"{base}/#/experiments/{experiment_id}", tmp_path / "overview.png")
        assert "matching runs" not in plain and "dropout=0.1" not in plain
        run_page = _render(ui_url(base, experiment_id, run.info.run_id), tmp_path / "run.png")
        assert "dropout=0.1" in run_page and "best_stsb_dev" in run_page
        assert (tmp_path / "runs.png").stat().st_size > 10_000
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.mark.slow  # a 2x2 sweep of a tiny model, an MLflow server and Chromium (~4-6 min on a busy 2-core machine)
def test_sweep_urls_open_on_the_swept_keys_and_headline_figures(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    if CHROMIUM is None:
        pytest.fail("no Chromium: install it with `apt-get install chromium` (Debian) to run this browser check")
    proc = subprocess.run(
        [shutil.which("cl-bench"), "-m", f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=16",
         "batch_size=8", "train.max_steps=2", "train.eval_steps=2", "eval=quick", "eval.anisotropy=false",
         "train.progress_bar=false", "dropout=0,0.1", "loss.tau=0.05,0.1", "hydra.sweep.dir=sweep"],
        cwd=tmp_path, capture_output=True, text=True, env=cli_env(data_dir), timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    table_url = next(line for line in lines if line.startswith("MLflow parent run: ")).split()[-1]
    charts_url = next(line for line in lines if line.startswith("MLflow charts (4 runs")).split()[-1]
    assert "viewStateShareKey=sweep-" in table_url and "compareRunsMode=CHART" in charts_url
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("cl-bench")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    parent = next(r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get("sweep.parent") == "true")
    assert {"sweep.csv", "sweep.png", "sweep_table.md"} <= {a.path for a in client.list_artifacts(parent.info.run_id)}
    children = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    # logger.log_model=best: the sweep's best job alone carries the model
    models = client.search_logged_models(experiment_ids=[experiment.experiment_id])
    assert len(models) == 1 and models[0].source_run_id in {r.info.run_id for r in children}
    server, base = _serve(uri)
    try:
        table = _text(_render(table_url.replace("http://127.0.0.1:5000", base), tmp_path / "sweep_runs.png", 1800))
        assert "4 matching runs" in table, table[:3000]
        # the columns: the swept keys, then the selection figure (the sort), then the other headline figures. The
        # DOM lists the header cells out of their screen order, the cells of a row in it: the first row (the best
        # best_stsb_dev, sorted first) reads dropout, loss.tau, best_stsb_dev, stsb
        header = table[table.index("Run Name"):]
        assert all(name in header[:300] for name in ("dropout", "loss.tau", "best_stsb_dev", "stsb", "Dataset"))
        top = max(children, key=lambda r: r.data.metrics["select/best_stsb_dev"])
        first_row = (f"{top.data.params['dropout']} {top.data.params['loss.tau']} "
                     f"{top.data.metrics['select/best_stsb_dev']!r} {top.data.metrics['sts/stsb']!r}")
        assert first_row in header, (first_row, header[:800])
        assert "Sort: select/best_stsb_dev" in table and "training" in header  # the Dataset column: the corpus's context
        assert all(r.data.tags["mlflow.runName"] in table for r in children)
        charts = _text(_render(charts_url.replace("http://127.0.0.1:5000", base), tmp_path / "sweep_charts.png", 1800))
        assert "4 matching runs" in charts and "cl-bench: swept keys and headline figures (" in charts, charts[:3000]
        # what the same experiment showed before (the plain runs URL): the parent alone, no metric column
        before = _text(_render(ui_url(base, experiment.experiment_id), tmp_path / "sweep_before.png", 1800))
        assert "best_stsb_dev" not in before[before.index("Run Name"):][:300]
    finally:
        server.terminate()
        server.wait(timeout=60)
