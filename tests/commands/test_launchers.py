"""Sweeps past one machine: submitit (SLURM config, local executor), an MLflow server, failed jobs in a sweep."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import pytest
from hydra import compose, initialize_config_dir

from cl_bench.commands.cli import CONF_DIR


def _cl_bench(args: list[str], cwd: Path, data_dir: Path, ok: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    exe = shutil.which("cl-bench")
    assert exe, "the cl-bench console script is not installed (pip install -e .)"
    env = dict(os.environ, CL_BENCH_DATA=str(data_dir), OMP_NUM_THREADS="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def _tiny(tiny_bert: Path) -> list[str]:
    return [
        f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=32", "batch_size=8", "train.max_steps=2",
        "train.eval_steps=2", "train.progress_bar=false", "train.num_threads=1", "eval.tasks=[stsb]",
        "eval.anisotropy=false",
    ]


def _runs(uri: str, experiment: str = "cl-bench") -> tuple[mlflow.entities.Run, list[mlflow.entities.Run]]:
    client = mlflow.MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return parent, children


def test_slurm_launcher_configs_compose() -> None:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        plain = compose("config", overrides=["hydra/launcher=submitit_slurm"], return_hydra_config=True)
        preset = compose(
            "config", overrides=["experiment=ablation_dropout", "hydra/launcher=slurm_gpu", "hydra.launcher.partition=gpu"],
            return_hydra_config=True,
        )
    target = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert plain.hydra.launcher._target_ == target and preset.hydra.launcher._target_ == target
    launcher = preset.hydra.launcher
    assert (launcher.partition, launcher.gpus_per_node, launcher.tasks_per_node, launcher.timeout_min) == ("gpu", 1, 1, 720)
    assert str(preset.hydra.mode) == "RunMode.MULTIRUN"  # the ablation grid still drives the jobs


@pytest.mark.slow
def test_sweep_with_submitit_local_launcher(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    _cl_bench(
        ["-m", *_tiny(tiny_bert), "dropout=0,0.1", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=20",
         "hydra.sweep.dir=sweep"],
        tmp_path, data_dir,
    )
    assert sorted(p.parent.name for p in (tmp_path / "sweep").glob("*/results.json")) == ["0", "1"]
    assert list((tmp_path / "sweep" / ".submitit").iterdir())  # the jobs really went through submitit
    parent, children = _runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert sorted(r.data.params["dropout"] for r in children) == ["0.0", "0.1"]
    assert all(r.info.status == "FINISHED" and "sts/stsb" in r.data.metrics for r in children)
    assert parent.info.status == "FINISHED" and parent.data.tags["sweep.failed_children"] == "none"


@pytest.mark.slow
def test_one_failed_job_does_not_stop_a_joblib_sweep(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """A job that fails while running (τ = 1e-39 overflows the logits at step 1) fails alone; an invalid
    value (τ = 0) stops the whole sweep before any job starts (tests/config/test_options_act.py)."""
    proc = _cl_bench(
        ["-m", *_tiny(tiny_bert), "loss.tau=0.05,1e-39", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
         "hydra.sweep.dir=sweep",
         "train.num_workers=2"],  # DataLoader workers started inside loky's worker processes
        tmp_path, data_dir, ok=False,
    )
    assert proc.returncode != 0  # Hydra reports the failed job after the sweep
    assert "non-finite loss" in proc.stderr
    assert (tmp_path / "sweep" / "0" / "results.json").is_file()  # the valid job ran to the end
    parent, children = _runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    by_tau = {r.data.params.get("loss.tau"): r for r in children}
    assert by_tau["0.05"].info.status == "FINISHED" and "sts/stsb" in by_tau["0.05"].data.metrics
    failed = by_tau["1e-39"]
    assert failed.info.status == "FAILED" and "non-finite loss" in failed.data.tags["error"]
    # the sweep's summary names the failed job
    assert parent.info.status == "FAILED"
    assert parent.data.tags["sweep.failed_children"] == failed.data.tags["mlflow.runName"]
    invalid = _cl_bench(["-m", *_tiny(tiny_bert), "loss.tau=0.05,0", "hydra.sweep.dir=sweep2"], tmp_path, data_dir, ok=False)
    # a config-only value is checked on every grid point before Hydra starts (cl_bench.config.early_checks._check_override_values)
    # loss.tau is a float (its spec's type, given by composition): 0 reads 0.0
    assert invalid.returncode == 2 and invalid.stderr == "cl-bench: error: loss.tau: must be > 0, got 0.0\n"
    assert not (tmp_path / "sweep2" / "0").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(url: str, server: subprocess.Popen, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, f"mlflow server exited with {server.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"mlflow server not up at {url} after {seconds}s")


@pytest.mark.slow
def test_run_is_sent_to_a_real_mlflow_server(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    mlflow_exe = Path(sys.executable).with_name("mlflow")
    assert mlflow_exe.is_file(), "the mlflow command is not installed beside python"
    port = _free_port()
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    server = subprocess.Popen(
        [str(mlflow_exe), "server", "--backend-store-uri", f"sqlite:///{server_dir / 'mlflow.db'}",
         "--artifacts-destination", str(server_dir / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        cwd=server_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env=dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true"),
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        _wait_for(f"{uri}/health", server)
        _cl_bench([*_tiny(tiny_bert), f"logger.tracking_uri={uri}", "logger.experiment_name=shared",
                   "hydra.run.dir=run"], tmp_path, data_dir)
        client = mlflow.MlflowClient(tracking_uri=uri)
        (run,) = client.search_runs([client.get_experiment_by_name("shared").experiment_id])
        assert run.info.status == "FINISHED" and run.data.params["train.max_steps"] == "2"
        assert "sts/stsb" in run.data.metrics and len(client.get_metric_history(run.info.run_id, "train/loss")) >= 1
        assert {"results.json", "config.yaml"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
        assert not (tmp_path / "mlflow.db").exists()  # nothing went to the local default store
        assert list((server_dir / "artifacts").rglob("results.json"))  # the server holds the artifacts
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its worker: the group this test started
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
    assert server.poll() is not None
