"""MLflow's UI in headless Chromium: the URL cl-bench prints opens on the runs table, not the GenAI traces page;
the compare view a sweep prints shows its runs side by side."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest

from cl_bench.tracking.mlflow_logger import compare_url, ensure_experiment, ui_url

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _render(url: str, out: Path) -> str:
    """The page's DOM after its scripts ran (and a screenshot of it in ``out``)."""
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,900",
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
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                               "--port", str(port), "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        started = time.time()
        while True:
            try:
                urllib.request.urlopen(base, timeout=5)
                break
            except OSError:
                assert server.poll() is None and time.time() - started < 400, "mlflow ui did not start"
                time.sleep(2)
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
        # the compare view a sweep prints (cl_bench.commands.sweep_callbacks): both runs, their param and metric
        compare = _render(compare_url(base, experiment_id, run_ids), tmp_path / "compare.png")
        text = compare.replace("<!-- -->", "")
        assert "Comparing 2 Runs" in text or "compare" in text.lower(), text[:2000]
        assert "dropout=0.1" in text and "dropout=0" in text and "best_stsb_dev" in text and "81.2" in text
        assert (tmp_path / "compare.png").stat().st_size > 10_000
    finally:
        server.terminate()
        server.wait(timeout=60)
