"""Runs that survive faults: SIGKILL + resume, SIGTERM, non-finite losses, a dying tracking server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
from conftest import cli_env

from cl_bench.tracking.sync import main as sync_main


def _env(data_dir: Path) -> dict[str, str]:
    return cli_env(data_dir)


def _args(tiny_bert: Path, run_dir: Path, db: Path, *extra: str) -> list[str]:
    return [
        shutil.which("cl-bench") or "cl-bench",
        f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=160", "batch_size=8",
        "train.max_steps=16", "train.eval_steps=2", "train.log_steps=1", "train.checkpoint_steps=4",
        "train.progress_bar=false", "eval.align_uniform=false", f"hydra.run.dir={run_dir}",
        f"logger.tracking_uri=sqlite:///{db}", *extra,
    ]


def _popen(args: list[str], data_dir: Path, log_file: Path) -> subprocess.Popen:
    """Start cl-bench with its output in a file (a pipe could fill up and block the run)."""
    return subprocess.Popen(args, env=_env(data_dir), stdout=log_file.open("w"), stderr=subprocess.STDOUT, text=True)


def _weight_files(run_dir: Path) -> list[str]:
    """Every file under ``run_dir`` that holds model weights (checkpoints, state dicts, HF weights)."""
    suffixes = (".pt", ".bin", ".safetensors")
    return sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.suffix in suffixes)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    start = time.time()
    while not path.exists():
        assert proc.poll() is None, f"run ended before {path.name} appeared"
        assert time.time() - start < timeout, f"{path} did not appear"
        time.sleep(0.02)


@pytest.mark.slow  # ~2 min on 2 cores: three training processes; the SIGTERM/checkpoint tests stay default
def test_sigkill_then_resume_gives_the_same_final_metrics(tiny_bert, data_dir, tmp_path) -> None:
    # The reference prepares batches in the main process; the killed and resumed runs in 2 DataLoader
    # workers: equal figures show both that workers change nothing and that the resume is exact.
    db, workers = tmp_path / "mlflow.db", "train.num_workers=2"
    reference = subprocess.run(_args(tiny_bert, tmp_path / "whole", db), env=_env(data_dir), capture_output=True, text=True)
    assert reference.returncode == 0, reference.stderr[-3000:]

    killed_dir = tmp_path / "killed"
    proc = _popen(_args(tiny_bert, killed_dir, db, workers), data_dir, tmp_path / "killed.log")
    _wait_for(killed_dir / "checkpoint.pt", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed_dir / "results.json").exists()  # it really died mid-training

    resumed = subprocess.run(
        _args(tiny_bert, killed_dir, db, workers, "train.resume=true"), env=_env(data_dir), capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout + resumed.stderr
    whole = json.loads((tmp_path / "whole" / "results.json").read_text())
    again = json.loads((killed_dir / "results.json").read_text())
    assert again == whole  # to the last digit
    for run_dir in (tmp_path / "whole", killed_dir):  # a finished run keeps one copy of its weights
        assert _weight_files(run_dir) == ["best_model/model.safetensors"]

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("cl-bench").experiment_id])
    assert len(runs) == 2  # the reference run and the killed-then-continued one: continued, not duplicated
    continued = next(r for r in runs if r.info.run_id == (killed_dir / "mlflow_run_id.txt").read_text())
    assert continued.info.status == "FINISHED"
    assert continued.data.metrics["sts/sts_avg"] == pytest.approx(whole["sts/sts_avg"])


def test_sigterm_stops_after_the_step_with_checkpoint_and_killed_status(tiny_bert, data_dir, tmp_path) -> None:
    db, run_dir = tmp_path / "mlflow.db", tmp_path / "run"
    proc = _popen(_args(tiny_bert, run_dir, db, "train.max_steps=400"), data_dir, tmp_path / "term.log")
    _wait_for(run_dir / "metrics.jsonl", proc)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=300)
    output = (tmp_path / "term.log").read_text()
    assert proc.returncode == 128 + signal.SIGTERM, output[-3000:]
    assert "continue with: train.resume=" in output
    assert (run_dir / "checkpoint.pt").is_file()
    partial = json.loads((run_dir / "results.json").read_text())
    assert 0 < partial["run/interrupted_at_step"] < 400
    assert json.loads((run_dir / "status.json").read_text())["status"] == "KILLED"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}")
    run = client.get_run((run_dir / "mlflow_run_id.txt").read_text())
    assert run.info.status == "KILLED" and "SIGTERM" in run.data.tags["error"]


def test_nonfinite_loss_stops_with_a_clear_message(tiny_bert, data_dir, tmp_path) -> None:
    db, run_dir = tmp_path / "mlflow.db", tmp_path / "nan"
    # cos/tau overflows float32 at tau=1e-39: inf logits, NaN loss on purpose
    proc = subprocess.run(_args(tiny_bert, run_dir, db, "loss.tau=1e-39"), env=_env(data_dir), capture_output=True, text=True)
    assert proc.returncode == 1  # the run failed (not a bad input: 2): one line, no traceback
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("cl-bench: error: step 1: non-finite loss or gradient (loss=nan, loss_contrastive=nan)")
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}")
    run = client.get_run((run_dir / "mlflow_run_id.txt").read_text())
    assert run.info.status == "FAILED" and "NonFiniteLossError" in run.data.tags["error"]


def test_nonfinite_steps_can_be_skipped_and_counted(tiny_bert, data_dir, tmp_path) -> None:
    run_dir = tmp_path / "skip"
    proc = subprocess.run(
        _args(tiny_bert, run_dir, tmp_path / "m.db", "loss.tau=1e-39", "train.nonfinite=skip", "train.max_steps=3"),
        env=_env(data_dir), capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["train/skipped_steps"] == 3.0


def test_skipped_steps_that_leave_diverged_weights_end_in_one_line_before_evaluation(tiny_bert, data_dir, tmp_path) -> None:
    """``train.nonfinite=skip`` with ``train.lr=1e8`` (issue 46, row 7): the step after the first update is skipped, the
    weights have diverged and the dev evaluation's embeddings are NaN. The run ends as ``nonfinite=stop`` ends (FAILED
    in the folder and in MLflow, exit 1), with one line naming the step, what to lower and the last good checkpoint,
    before any figure is computed (it crashed in an SVD of the NaN embeddings)."""
    db, run_dir = tmp_path / "mlflow.db", tmp_path / "diverged"
    proc = subprocess.run(_args(tiny_bert, run_dir, db, "train.nonfinite=skip", "train.lr=1e8", "train.max_steps=4"),
                          env=_env(data_dir), capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cl-bench: error: step 2: the encoder's embeddings are not finite ("), lines
    assert "after 1 skipped non-finite step" in lines[0] and "last good checkpoint: none yet" in lines[0]
    assert "lower train.lr, now 1e+08" in lines[0] and "LinAlgError" not in proc.stdout + proc.stderr
    assert "step skipped" in proc.stdout  # the skip itself was logged, as before
    assert not (run_dir / "results.json").exists()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "FAILED" and "embeddings are not finite" in status["error"]
    run = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}").get_run((run_dir / "mlflow_run_id.txt").read_text())
    assert run.info.status == "FAILED" and run.data.tags["error"].startswith("NonFiniteLossError: step 2: ")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(store: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
         "--default-artifact-root", str(store / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise AssertionError("mlflow server did not start")


def _stop_server(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()


@pytest.mark.slow
def test_server_dying_mid_run_loses_nothing_and_sync_uploads_later(tiny_bert, data_dir, tmp_path) -> None:
    store, port, run_dir = tmp_path / "server", _free_port(), tmp_path / "run"
    store.mkdir()
    uri = f"http://127.0.0.1:{port}"
    server = _start_server(store, port)
    try:
        args = _args(tiny_bert, run_dir, tmp_path / "unused.db", f"logger.tracking_uri={uri}", "train.max_steps=60")
        proc = _popen(args, data_dir, tmp_path / "run.log")
        _wait_for(run_dir / "mlflow_sent_lines.txt", proc)
    finally:
        _stop_server(server)  # the server dies mid-run
    proc.wait(timeout=600)
    output = (tmp_path / "run.log").read_text()
    assert proc.returncode == 0, output[-3000:]  # training went on
    assert "MLflow log_metrics failed" in output and "cl-bench-sync" in output
    results = json.loads((run_dir / "results.json").read_text())
    local_lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert int((run_dir / "mlflow_sent_lines.txt").read_text()) < len(local_lines)

    server = _start_server(store, port)  # back up: upload what it missed
    try:
        with pytest.raises(SystemExit) as exit_code:
            sync_main([str(run_dir), "--tracking-uri", uri])
        assert exit_code.value.code == 0
        client = mlflow.MlflowClient(tracking_uri=uri)
        run = client.get_run((run_dir / "mlflow_run_id.txt").read_text())
        assert run.info.status == "FINISHED"
        assert run.data.metrics["sts/sts_avg"] == pytest.approx(results["sts/sts_avg"])
        history = client.get_metric_history(run.info.run_id, "train/loss")
        assert sorted(m.step for m in history) == list(range(1, 61))  # every step, none twice
    finally:
        _stop_server(server)


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (an evaluation left running would)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        if text in args:
            found.append(args)
    return found


def test_sigterm_during_eval_stops_at_the_next_batch_with_killed_status(tiny_bert, data_dir, tmp_path) -> None:
    db, run_dir, log_file = tmp_path / "mlflow.db", tmp_path / "eval_run", tmp_path / "eval.log"
    args = [shutil.which("cl-bench") or "cl-bench", "mode=eval", f"model.name_or_path={tiny_bert}", "pooler=avg",
            "eval.batch_size=2", "eval.cache=false",  # a cache hit would skip the encoding this test interrupts
            f"hydra.run.dir={run_dir}", f"logger.tracking_uri=sqlite:///{db}"]
    proc = _popen(args, data_dir, log_file)
    start = time.time()
    while "distinct sentences to encode" not in log_file.read_text():  # the cost estimate: encoding starts
        assert proc.poll() is None, log_file.read_text()[-3000:]
        assert time.time() - start < 300, "the evaluation did not start"
        time.sleep(0.05)
    time.sleep(1.0)  # past the tokenization of all sentences, into the batches
    proc.send_signal(signal.SIGTERM)
    signalled = time.time()
    while "evaluation stopped" not in log_file.read_text() and proc.poll() is None:
        time.sleep(0.05)
    stopped_in = time.time() - signalled  # logged once results.json is written and the run is KILLED
    proc.wait(timeout=120)
    output = log_file.read_text()
    assert proc.returncode == 128 + signal.SIGTERM, output[-3000:]
    # the evaluation takes minutes at batch 2 (the estimate says so); the stop, MLflow's KILLED included, seconds
    assert stopped_in < 10, f"took {stopped_in:.1f} s to stop"
    assert "encoded" not in output  # stopped inside the encoding, not after it
    assert json.loads((run_dir / "results.json").read_text()) == {"run/evaluation_interrupted": 1.0}
    assert json.loads((run_dir / "status.json").read_text())["status"] == "KILLED"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}")
    run = client.get_run((run_dir / "mlflow_run_id.txt").read_text())
    assert run.info.status == "KILLED" and "SIGTERM during evaluation" in run.data.tags["error"]
    assert _processes_mentioning(str(run_dir)) == []


def _descendants(pid: int) -> set[int]:
    """Process ids of every live descendant of ``pid`` (from /proc: children by parent id)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # ended meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pids: set[int]) -> set[int]:
    """The processes of ``pids`` still running (zombies, which run nothing, left out)."""
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            alive.add(pid)
    return alive


def _wait_for_text(paths: list[Path], text: str, proc: subprocess.Popen, log_file: Path, timeout: float = 300) -> None:
    start = time.time()
    while not all(p.is_file() and text in p.read_text() for p in paths):
        assert proc.poll() is None, log_file.read_text()[-3000:]
        assert time.time() - start < timeout, f"'{text}' did not appear in {paths}"
        time.sleep(0.1)


@pytest.mark.slow  # 45 s each: a joblib sweep's start-up
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_sweep_parent_leaves_no_evaluation_running(tiny_bert, data_dir, tmp_path, signum) -> None:
    # Two jobs evaluate in the joblib launcher's worker processes (loky); the parent is killed mid-encoding.
    db, sweep, log_file = tmp_path / "mlflow.db", tmp_path / "sweep", tmp_path / "sweep.log"
    args = [shutil.which("cl-bench") or "cl-bench", "-m", "mode=eval", f"model.name_or_path={tiny_bert}",
            "pooler=avg,cls_before_pooler", "eval.batch_size=2", "eval.cache=false", "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}", f"logger.tracking_uri=sqlite:///{db}"]
    proc, workers = _popen(args, data_dir, log_file), set[int]()
    try:
        _wait_for_text([sweep / job / "cli.log" for job in ("0", "1")], "distinct sentences to encode", proc, log_file)
        time.sleep(1.0)  # into the batches
        workers = _descendants(proc.pid)
        assert len(workers) >= 2, workers  # the jobs' worker processes (and loky's resource trackers)
        proc.send_signal(signum)
        proc.wait(timeout=60)
        killed = time.time()
        while _alive(workers) and time.time() - killed < 30:
            time.sleep(0.1)
        gone_in = time.time() - killed
        assert not _alive(workers), f"left running: {[_processes_mentioning(str(p)) for p in _alive(workers)]}"
    finally:
        for pid in _alive(_descendants(proc.pid) | workers):
            os.kill(pid, signal.SIGKILL)  # never leave this test's processes behind
        if proc.poll() is None:
            proc.kill()
    assert gone_in < 15, f"the evaluations took {gone_in:.1f} s to stop"
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{db}")
    for job in ("0", "1"):  # each job stopped as a user's SIGTERM stops it: partial results, KILLED
        assert json.loads((sweep / job / "status.json").read_text())["status"] == "KILLED"
        assert json.loads((sweep / job / "results.json").read_text()) == {"run/evaluation_interrupted": 1.0}
        run = client.get_run((sweep / job / "mlflow_run_id.txt").read_text())
        assert run.info.status == "KILLED" and "SIGTERM during evaluation" in run.data.tags["error"]
    parent = (sweep / "mlflow_parent_run_id.txt").read_text()
    if signum == signal.SIGKILL:  # the parent said nothing: `cl-bench-sync SWEEP_DIR` ends its MLflow run (issue 46)
        assert client.get_run(parent).info.status == "RUNNING"
        with pytest.raises(SystemExit) as exit_:
            sync_main([str(sweep)])
        assert exit_.value.code == 0
    else:
        assert proc.returncode == 128 + signal.SIGTERM
    assert client.get_run(parent).info.status == "KILLED"


def test_a_killed_training_leaves_no_dataloader_worker(tiny_bert, data_dir, tmp_path) -> None:
    # train.num_workers=2: SIGKILL during a dev evaluation, while the persistent batch workers wait;
    # torch's workers watch their parent and exit (checked every 5 s)
    run_dir, log_file = tmp_path / "run", tmp_path / "train.log"
    proc = _popen(_args(tiny_bert, run_dir, tmp_path / "m.db", "train.num_workers=2", "eval.batch_size=2",
                        "train.max_steps=400", "train.eval_steps=2"), data_dir, log_file)
    workers: set[int] = set()
    try:
        _wait_for_text([log_file], "encoding 3833 sentences", proc, log_file)
        workers = _descendants(proc.pid)
        assert len(workers) == 2, workers
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        killed = time.time()
        while _alive(workers) and time.time() - killed < 30:
            time.sleep(0.1)
        assert not _alive(workers), f"DataLoader workers left running after {time.time() - killed:.0f} s"
    finally:
        for pid in _alive(_descendants(proc.pid) | workers):
            os.kill(pid, signal.SIGKILL)


def test_a_stop_request_ends_only_evaluations() -> None:
    from cl_bench.utils import interrupt

    interrupt.request_stop(signal.SIGINT)
    try:
        interrupt.check()  # training's dev evaluation: not an interruptible region, the step check stops training
        with interrupt.interruptible(), pytest.raises(interrupt.EvaluationInterrupted) as stopped:
            interrupt.check({"stsb": 80.0})
        assert stopped.value.partial == {"stsb": 80.0} and stopped.value.signum == signal.SIGINT
    finally:
        interrupt.reset()
    with interrupt.interruptible():
        interrupt.check()  # no request: nothing happens
