"""Issue 46, part 1: no run overwrites another, a resume is honest, saves are atomic, every run ends in a state.

The rejections run ``cl-bench``'s ``main`` in a fresh interpreter (one line, exit status, no torch, nothing written);
the saves fail with ``OSError(ENOSPC)`` raised where the bytes would go; ``cl-bench-sync`` runs against a real SQLite
MLflow store in ``tmp_path`` from another folder. The tests that train or kill a real run are ``slow``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli_env, minilm_path

from cl_bench.utils.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]

_PROBE = r"""
import contextlib, errno, io, json, sys
from cl_bench.commands import cli
from cl_bench.config import run_folder
if sys.argv[2] == "read-only":  # the folder's filesystem refuses writes, as a read-only mount does (even for root)
    def refuse(folder):
        raise OSError(errno.EROFS, "Read-only file system")
    run_folder._probe = refuse
answers = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["cl-bench", *argv]
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            cli.main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code
    answers.append([code, err.getvalue(), out.getvalue()])
heavy = sorted(m for m in ("torch", "transformers", "mlflow") if m in sys.modules)
print(json.dumps({"answers": answers, "heavy": heavy}))
"""


def _main(argvs: list[list[str]], cwd: Path, mode: str = "plain") -> tuple[list[tuple[int, str, str]], list[str]]:
    """``cli.main()`` for each argv in one fresh interpreter: [(exit status, stderr, stdout)], heavy modules loaded."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs), mode], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return [tuple(answer) for answer in result["answers"]], result["heavy"]


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and its sha256: equal snapshots are byte-identical folders."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _planted_run(folder: Path, status: str | None, params: dict | None = None) -> Path:
    """A run folder as a training run leaves it (results, metrics, weights, Hydra's config), with ``status``."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text("seed: 42\n")
    (folder / "best_model").mkdir()
    (folder / "best_model" / "model.safetensors").write_bytes(os.urandom(256))
    (folder / "metrics.jsonl").write_text('{"step": 2, "time": 1.0, "stsb_dev": 50.0}\n')
    (folder / "results.json").write_text('{"stsb": 40.0}')
    (folder / "params.json").write_text(json.dumps(params or {"seed": 42}))
    if status is not None:
        (folder / "status.json").write_text(json.dumps({"status": status, "error": None, "time": 1.0}))
    return folder


def _model_arg() -> str:
    return f"model.name_or_path={minilm_path()}"


# ----- row 1: a folder that holds a run is refused, before Hydra's job writes in it --------------------------------
def test_a_folder_holding_a_run_is_refused_in_one_line_and_left_byte_identical(tmp_path: Path) -> None:
    killed = _planted_run(tmp_path / "killed", "KILLED")
    finished = _planted_run(tmp_path / "finished", "FINISHED")
    sweep = tmp_path / "sweep"
    _planted_run(sweep / "1", "FINISHED")
    before = {p: _snapshot(p) for p in (killed, finished, sweep)}
    answers, heavy = _main([
        [_model_arg(), f"hydra.run.dir={killed}"],
        [_model_arg(), f"hydra.run.dir={finished}"],
        ["mode=eval", _model_arg(), f"hydra.run.dir={finished}"],
        ["-m", _model_arg(), f"hydra.sweep.dir={sweep}", "seed=1,2"],
    ], tmp_path)
    expected = [
        f"cl-bench: error: hydra.run.dir: {killed} already holds a run (results.json, status.json, metrics.jsonl, "
        f"best_model, params.json); continue it with train.resume={killed}, or replace it with "
        "train.overwrite_output_dir=true",
        f"cl-bench: error: hydra.run.dir: {finished} already holds a finished run (results.json, status.json, "
        "metrics.jsonl, best_model, params.json); choose another hydra.run.dir, or replace it with "
        "train.overwrite_output_dir=true",
        f"cl-bench: error: hydra.run.dir: {finished} already holds a finished run (results.json, status.json, "
        "metrics.jsonl, best_model, params.json); choose another hydra.run.dir",
        f"cl-bench: error: hydra.sweep.dir: {sweep} already holds the runs of a sweep (job folders 1); choose another "
        "hydra.sweep.dir, or replace them with train.overwrite_output_dir=true",
    ]
    for (code, stderr, _), line in zip(answers, expected, strict=True):
        assert code == 2 and stderr.strip() == line, stderr
    assert {p: _snapshot(p) for p in (killed, finished, sweep)} == before  # .hydra/ included: Hydra never ran
    assert sorted(p.name for p in sweep.iterdir()) == ["1"]  # no varied_keys.json, no job folder 0
    assert heavy == []  # before any model (nor torch) loads
    assert not (tmp_path / "outputs").exists()


def test_default_run_and_sweep_folders_carry_a_per_process_suffix() -> None:
    """Two commands started in the same microsecond get different folders: the time, then a random suffix drawn
    once per process (``${cl_bench.unique:}``)."""
    from hydra import compose, initialize_config_dir

    import cl_bench.commands.cli  # noqa: F401 (registers the schemas and resolvers)
    from cl_bench.config.catalog import CONF_DIR
    from cl_bench.utils.rundir import process_token

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", return_hydra_config=True)
    token = process_token()
    assert str(cfg.hydra.run.dir).endswith(f"-{token}") and str(cfg.hydra.sweep.dir).endswith(f"-{token}")
    assert len(token) == 6 and int(token, 16) >= 0
    draw = "from cl_bench.utils.rundir import process_token; print(process_token())"
    tokens = {subprocess.run([sys.executable, "-c", draw], capture_output=True, text=True, env=dict(
        os.environ, PYTHONPATH=str(ROOT)), check=True).stdout.strip() for _ in range(3)}
    assert len(tokens) == 3  # each process its own (a repeat has odds of 3 in 16.7 million)


# ----- row 2 and 3: an honest resume -------------------------------------------------------------------------------
def test_resuming_a_finished_run_says_so_and_does_nothing(tmp_path: Path) -> None:
    finished = _planted_run(tmp_path / "finished", "FINISHED")
    before = _snapshot(finished)
    answers, heavy = _main([[_model_arg(), f"train.resume={finished}"],
                            [_model_arg(), f"hydra.run.dir={finished}", "train.resume=true"]], tmp_path)
    for code, stderr, stdout in answers:
        assert code == 0 and stderr == "", stderr
        assert stdout.strip() == (f"cl-bench: train.resume: {finished} is a finished run (status.json: FINISHED; its "
                                  "checkpoint was removed); nothing to do. Score it again with mode=eval "
                                  f"model.name_or_path={finished}/best_model")
    assert _snapshot(finished) == before and heavy == []
    assert not (tmp_path / "outputs").exists()  # no folder for the command either


def _first_segment_params(tmp_path: Path, run_dir: Path, overrides: list[str]) -> dict:
    """The params.json a run started with ``overrides`` records (composed as the job composes it)."""
    from hydra import compose, initialize_config_dir

    import cl_bench.commands.cli  # noqa: F401 (registers the schemas and resolvers)
    from cl_bench.config import inert_keys
    from cl_bench.config.catalog import CONF_DIR
    from cl_bench.config.run_folder import current_params

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    return current_params(cfg, run_dir, inert_keys(cfg))


def test_resuming_with_settings_that_change_the_run_is_refused_naming_each_key(tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    first = [_model_arg(), "batch_size=8", "train.max_steps=40"]
    _planted_run(run_dir, "KILLED", _first_segment_params(tmp_path, run_dir, first))
    (run_dir / "results.json").unlink()
    before = _snapshot(run_dir)
    answers, heavy = _main([[*first, f"train.resume={run_dir}", "batch_size=16", "train.lr=1e-3"]], tmp_path)
    (code, stderr, _), = answers
    assert code == 2 and stderr.strip() == (
        f"cl-bench: error: train.resume: the run in {run_dir} was started with other settings (batch_size: was 8, now "
        "16; train.lr: was 3e-05, now 0.001); resume with its own values, or start a new run (what a resume may "
        "change: docs/faults-data.md)")
    assert _snapshot(run_dir) == before and heavy == []


def test_the_keys_a_resume_may_change_are_one_declared_set(tmp_path: Path) -> None:
    """Training longer, logging, threads and the final evaluation may change; what it computes may not."""
    from omegaconf import OmegaConf

    from cl_bench.config import inert_keys
    from cl_bench.config.run_folder import (
        RESUMABLE_KEYS,
        check_run_folder,
        current_params,
        may_change_on_resume,
        segment_changes,
    )

    assert {"train.max_steps", "train.log_steps", "train.num_threads", "train.progress_bar", "eval."} <= set(RESUMABLE_KEYS)
    assert may_change_on_resume("eval.tasks") and may_change_on_resume("logger.tracking_uri")
    assert not may_change_on_resume("train.lr") and not may_change_on_resume("seed")
    run_dir = tmp_path / "killed"
    first = [_model_arg(), "train.max_steps=40"]
    _planted_run(run_dir, "KILLED", _first_segment_params(tmp_path, run_dir, first))
    from hydra import compose, initialize_config_dir

    from cl_bench.config.catalog import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        longer = compose("config", overrides=[*first, "train.max_steps=80", "train.log_steps=5",
                                              f"train.resume={run_dir}"], return_hydra_config=True)
    inert = inert_keys(longer)
    check_run_folder(longer, run_dir, inert)  # passes
    now = current_params(longer, run_dir, inert)
    assert segment_changes(run_dir, now) == {"train.log_steps": (10, 5), "train.max_steps": (40, 80)}
    assert OmegaConf.select(longer, "train.overwrite_output_dir") is False  # declared in the schema, off by default


# ----- row 4: atomic saves, a full disk ------------------------------------------------------------------------------
def _full_disk(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_keeps_the_previous_best_model_byte_identical(tmp_path: Path) -> None:
    from cl_bench.utils.atomic import SaveError, atomic_folder

    best = tmp_path / "best_model"
    with atomic_folder(best) as folder:
        (folder / "config.json").write_text('{"hidden": 32}')
        (folder / "model.safetensors").write_bytes(os.urandom(1024))
    before = _snapshot(best)
    with pytest.raises(SaveError) as raised, atomic_folder(best) as folder:
        (folder / "config.json").write_text('{"hidden": 64}')  # the new folder is half written when the disk fills
        _full_disk()
    assert str(raised.value) == (f"could not save {best}: No space left on device (ENOSPC); the previous complete "
                                 f"best_model is kept unchanged at {best}")
    assert _snapshot(best) == before  # never a half folder: the previous one, byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best_model"]  # no temporary folder left beside it


def test_a_full_disk_keeps_the_previous_checkpoint_results_and_status(tmp_path: Path, monkeypatch) -> None:
    import torch

    from cl_bench.tracking.mlflow_logger import RunTracker
    from cl_bench.train import checkpoint
    from cl_bench.utils.atomic import SaveError

    path = tmp_path / "checkpoint.pt"
    checkpoint.atomic_save({"step": torch.tensor(4)}, path)
    tracker = RunTracker(tmp_path, enabled=False)
    tracker.log_results({"stsb": 40.0})
    tracker.finish("KILLED", error="SIGTERM after step 4")
    before = _snapshot(tmp_path)
    real_save = torch.save

    def half_then_full(obj: object, target: object) -> None:  # some bytes reach the file, then the disk is full
        Path(target).write_bytes(b"PK\x03\x04 half")
        raise RuntimeError("[enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file "
                           "data/0: file write failed")

    monkeypatch.setattr(checkpoint.torch, "save", half_then_full)
    with pytest.raises(SaveError) as raised:
        checkpoint.atomic_save({"step": torch.tensor(8)}, path)
    assert str(raised.value).startswith(f"could not save {path}: [enforce fail") and str(raised.value).endswith(
        f"; the previous complete checkpoint.pt is kept unchanged at {path}")
    monkeypatch.setattr(checkpoint.torch, "save", real_save)
    monkeypatch.setattr(Path, "write_text", _full_disk)
    with pytest.raises(SaveError, match=r"results\.json: No space left on device \(ENOSPC\); the previous complete "):
        tracker.log_results({"stsb": 41.0})
    with pytest.raises(SaveError, match=r"status\.json: No space left on device"):
        tracker.finish("FINISHED")
    assert _snapshot(tmp_path) == before  # checkpoint.pt, results.json, status.json: byte-identical, no .tmp file


# ----- row 12: a read-only folder, a signal during start-up ---------------------------------------------------------
def test_a_read_only_output_folder_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    answers, heavy = _main([[_model_arg(), f"hydra.run.dir={tmp_path}/ro/run"],
                            ["-m", _model_arg(), f"hydra.sweep.dir={tmp_path}/ro/sweep", "seed=1,2"]],
                           tmp_path, mode="read-only")
    (code, stderr, _), (sweep_code, sweep_stderr, _) = answers
    assert code == 2 and stderr.strip() == (f"cl-bench: error: hydra.run.dir: cannot write the run folder "
                                            f"{tmp_path}/ro/run ({tmp_path}: Read-only file system); choose a writable "
                                            "hydra.run.dir"), stderr
    assert sweep_code == 2 and sweep_stderr.strip().startswith(
        f"cl-bench: error: hydra.sweep.dir: cannot write the run folder {tmp_path}/ro/sweep ("), sweep_stderr
    assert sweep_stderr.strip().count("\n") == 0 and heavy == []
    assert not (tmp_path / "ro").exists() and not (tmp_path / "outputs").exists()


def test_sigterm_during_start_up_ends_killed_with_128_plus_signal(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = [shutil.which("cl-bench") or "cl-bench", f"model.name_or_path={tiny_bert}", "data=wiki1m_head",
            "data.limit=40", "batch_size=8", "train.max_steps=4", "eval=quick", f"hydra.run.dir={run_dir}",
            f"logger.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=cli_env(data_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    started = time.time()
    while not (run_dir / ".hydra" / "config.yaml").is_file():  # Hydra made the folder: the job's start-up
        assert proc.poll() is None and time.time() - started < 120, proc.stdout.read()[-3000:]
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 128 + signal.SIGTERM, output[-3000:]
    assert "Traceback" not in output
    status = json.loads(RunDir(run_dir).status.read_text())
    assert status["status"] == "KILLED" and status["error"] == "SIGTERM during start-up"
    if RunDir(run_dir).run_id.is_file():  # the tracker had started: MLflow says KILLED too
        import mlflow

        run = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(RunDir(run_dir).run_id.read_text())
        assert run.info.status == "KILLED"


# ----- rows 5 and 6: cl-bench-sync reaches the run's own store, marks the dead, never doubles ------------------------
def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


def _recorded_folder(folder: Path, uri: str, run_name: str, run_id: str | None = None, parent: str | None = None,
                     lines: int = 3, mode: str = "eval") -> Path:
    """A folder as a run killed without a word leaves it: params, tags, tracking record, metrics, no status."""
    folder.mkdir(parents=True)
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "config.yaml").write_text(f"mode: {mode}\n")
    (folder / "params.json").write_text(json.dumps({"mode": mode, "seed": 42}))
    tags = {"mode": mode, "run_dir": str(folder), **({"mlflow.parentRunId": parent} if parent else {})}
    (folder / "tags.json").write_text(json.dumps(tags))
    (folder / "tracking.json").write_text(json.dumps({"tracking_uri": uri, "experiment_name": "cl-bench",
                                                      "run_name": run_name, "parent_run_id": parent}))
    (folder / "metrics.jsonl").write_text("".join(json.dumps({"step": i, "time": 100.0 + i, "sts/stsb": float(i)}) + "\n"
                                                  for i in range(lines)))
    if run_id is not None:
        (folder / "mlflow_run_id.txt").write_text(run_id)
    return folder


def test_sync_marks_a_killed_eval_killed_in_its_own_store_from_anywhere(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    from cl_bench.tracking.mlflow_logger import ensure_experiment
    from cl_bench.tracking.sync import main as sync_main

    uri = _store(tmp_path)
    (tmp_path / "store").mkdir()
    client = mlflow.MlflowClient(uri)
    running = client.create_run(ensure_experiment(uri, "cl-bench"), run_name="eval tiny").info.run_id  # SIGKILLed
    folder = _recorded_folder(tmp_path / "runs" / "eval", uri, "eval tiny", run_id=running, lines=0)
    (folder / "metrics.jsonl").unlink()  # killed before its first figure: no metrics.jsonl, no results.json
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(SystemExit) as exit_:
        sync_main([str(folder)])
    assert exit_.value.code == 0
    assert client.get_run(running).info.status == "KILLED"
    assert json.loads(RunDir(folder).status.read_text())["status"] == "KILLED"  # the folder says so too
    assert not (elsewhere / "mlflow.db").exists()  # the run's own store, not the current folder's


def test_sync_after_a_locked_store_uses_the_recorded_store_and_name_and_resumes_without_duplicates(
        tmp_path: Path, monkeypatch) -> None:
    import mlflow

    from cl_bench.tracking import sync

    uri = _store(tmp_path)
    (tmp_path / "store").mkdir()
    folder = _recorded_folder(tmp_path / "runs" / "train", uri, "simcse tau=0.1", lines=4, mode="train")
    (folder / "status.json").write_text(json.dumps({"status": "FINISHED", "error": None, "time": 1.0}))
    monkeypatch.chdir(tmp_path / "runs")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    real_write_text = sync.write_text
    cut = {"after": 2}

    def cut_short(path: Path, text: str) -> None:  # the upload dies after its second metrics line
        real_write_text(path, text)
        if path.name == RunDir.SENT_LINES and text == str(cut["after"]):
            raise KeyboardInterrupt

    monkeypatch.setattr(sync, "write_text", cut_short)
    with pytest.raises(KeyboardInterrupt):
        sync.sync_run(folder)
    RunDir(folder).run_id.unlink()  # even the run id record was lost: the run is found again by its folder
    monkeypatch.setattr(sync, "write_text", real_write_text)
    run_id = sync.sync_run(folder)
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("cl-bench").experiment_id])
    assert [r.info.run_id for r in runs] == [run_id]  # one run, not two
    run = runs[0]
    assert run.info.run_name == "simcse tau=0.1" and run.info.status == "FINISHED"
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "sts/stsb")] == [(i, float(i)) for i in range(4)]
    assert run.data.params == {"mode": "train", "seed": "42"}
    assert not (tmp_path / "runs" / "mlflow.db").exists()


def test_sync_of_a_sweep_whose_launcher_was_killed_ends_its_parent_killed(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    from cl_bench.tracking.mlflow_logger import ensure_experiment
    from cl_bench.tracking.sync import main as sync_main
    from cl_bench.utils.rundir import SweepDir

    uri = _store(tmp_path)
    (tmp_path / "store").mkdir()
    client = mlflow.MlflowClient(uri)
    experiment = ensure_experiment(uri, "cl-bench")
    parent = client.create_run(experiment, run_name="sweep dropout").info.run_id
    child = client.create_run(experiment, run_name="dropout=0", tags={"mlflow.parentRunId": parent}).info.run_id
    sweep = tmp_path / "sweep"
    _recorded_folder(sweep / "0", uri, "dropout=0", run_id=child, parent=parent, mode="train")
    _recorded_folder(sweep / "1", uri, "dropout=0.1", parent=parent, mode="train")  # never reached MLflow
    SweepDir(sweep).parent_run_id.write_text(parent)
    SweepDir(sweep).varied_keys_file.write_text('["dropout"]')
    SweepDir(sweep).tracking.write_text(json.dumps({"tracking_uri": uri, "experiment_name": "cl-bench"}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for _ in range(2):  # a second sync changes nothing
        with pytest.raises(SystemExit) as exit_:
            sync_main([str(sweep)])
        assert exit_.value.code == 0
    assert client.get_run(parent).info.status == "KILLED"
    children = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent}'")
    assert sorted((r.info.run_name, r.info.status) for r in children) == [("dropout=0", "KILLED"),
                                                                         ("dropout=0.1", "KILLED")]
    assert len(client.get_metric_history(child, "sts/stsb")) == 3
    assert not (tmp_path / "mlflow.db").exists()


# ----- the same promises on real runs (tiny BERT) --------------------------------------------------------------------
def _train_args(tiny_bert: Path, db: Path, *extra: str) -> list[str]:
    return [shutil.which("cl-bench") or "cl-bench", f"model.name_or_path={tiny_bert}", "data=wiki1m_head",
            "data.limit=400", "batch_size=8", "train.eval_steps=20", "train.checkpoint_steps=2", "train.log_steps=1",
            "train.progress_bar=false", "eval=quick", "eval.anisotropy=false", "eval.align_uniform=false",
            f"logger.tracking_uri=sqlite:///{db}", *extra]


@pytest.mark.slow  # three tiny trainings (~2 min on a busy 2-core machine)
def test_a_real_run_is_never_overwritten_and_resumes_honestly(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    import mlflow

    db, run_dir, env = tmp_path / "mlflow.db", tmp_path / "run", cli_env(data_dir)
    with (tmp_path / "first.log").open("w") as out:
        proc = subprocess.Popen(_train_args(tiny_bert, db, "train.max_steps=40", f"hydra.run.dir={run_dir}"),
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
        started = time.time()
        while not RunDir(run_dir).checkpoint.is_file():
            assert proc.poll() is None and time.time() - started < 300, (tmp_path / "first.log").read_text()[-3000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=300) == 128 + signal.SIGTERM
    killed = _snapshot(run_dir)

    again = subprocess.run(_train_args(tiny_bert, db, "train.max_steps=40", f"hydra.run.dir={run_dir}"), cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and again.stderr.strip().startswith(
        f"cl-bench: error: hydra.run.dir: {run_dir} already holds a run (") and again.stderr.count("\n") == 1
    other = subprocess.run(_train_args(tiny_bert, db, "train.max_steps=40", f"train.resume={run_dir}", "batch_size=16"),
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert other.returncode == 2 and "(batch_size: was 8, now 16)" in other.stderr
    assert _snapshot(run_dir) == killed  # both refusals left the killed run byte-identical (.hydra/ included)

    longer = subprocess.run(_train_args(tiny_bert, db, "train.max_steps=60", f"train.resume={run_dir}"), cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=600)
    assert longer.returncode == 0, longer.stderr[-3000:]
    assert json.loads(RunDir(run_dir).results.read_text())["train/steps"] == 60
    segment = json.loads(RunDir(run_dir).segments.read_text())
    assert segment["segment"] == 2 and segment["changed"] == {"train.max_steps": {"was": 40, "now": 60}}
    assert json.loads(RunDir(run_dir).params.read_text())["train.max_steps"] == 40  # the first segment's
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    run = client.get_run(RunDir(run_dir).run_id.read_text())
    assert run.info.status == "FINISHED" and run.data.tags["segment.2"] == "train.max_steps=60 (was 40)"
    finished = _snapshot(run_dir)
    done = subprocess.run(_train_args(tiny_bert, db, "train.max_steps=60", f"train.resume={run_dir}"), cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().startswith(f"cl-bench: train.resume: {run_dir} is a finished run")
    assert _snapshot(run_dir) == finished

    replaced = subprocess.run(_train_args(tiny_bert, db, "train.max_steps=4", f"hydra.run.dir={run_dir}",
                                          "train.overwrite_output_dir=true"), cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in RunDir(run_dir).metrics.read_text().splitlines()]
    assert max(steps) == 4 and not RunDir(run_dir).segments.exists()  # the new run's lines only, not a mix
    assert RunDir(run_dir).run_id.read_text() != run.info.run_id  # a new MLflow run; the old one stays as it was
    assert client.get_run(run.info.run_id).info.status == "FINISHED"


@pytest.mark.slow  # a mode=eval start-up and a SIGKILL (~40 s)
def test_a_sigkilled_eval_is_marked_killed_by_sync_in_its_own_store(tiny_bert: Path, data_dir: Path, tmp_path: Path,
                                                                    monkeypatch) -> None:
    import mlflow

    from cl_bench.tracking.sync import main as sync_main

    db, run_dir = tmp_path / "store" / "mlflow.db", tmp_path / "eval"
    db.parent.mkdir()
    args = [shutil.which("cl-bench") or "cl-bench", "mode=eval", f"model.name_or_path={tiny_bert}", "eval=quick",
            f"hydra.run.dir={run_dir}", f"logger.tracking_uri=sqlite:///{db}"]
    with (tmp_path / "eval.log").open("w") as out:
        proc = subprocess.Popen(args, cwd=tmp_path, env=cli_env(data_dir), stdout=out, stderr=subprocess.STDOUT)
        started = time.time()
        while not RunDir(run_dir).run_id.is_file():  # the MLflow run exists: the evaluation is under way
            assert proc.poll() is None and time.time() - started < 300, (tmp_path / "eval.log").read_text()[-3000:]
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    run_id = RunDir(run_dir).run_id.read_text()
    assert client.get_run(run_id).info.status == "RUNNING" and not RunDir(run_dir).status.exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(SystemExit) as exit_:
        sync_main([str(run_dir)])
    assert exit_.value.code == 0
    assert client.get_run(run_id).info.status == "KILLED"
    assert json.loads(RunDir(run_dir).status.read_text())["status"] == "KILLED"
    assert not (elsewhere / "mlflow.db").exists()


_FULL_DISK_AT_SECOND_CHECKPOINT = '''
import errno, hashlib, os
from pathlib import Path
from cl_bench.utils import atomic

_real, _calls = atomic.write_file, []


def write_file(path, write):
    path = Path(path)
    if path.name == "checkpoint.pt":
        _calls.append(path)
        if len(_calls) == 2:  # the disk fills during the second checkpoint, half-way through the file
            (path.parent / "kept.sha256").write_text(hashlib.sha256(path.read_bytes()).hexdigest())

            def half(tmp):
                Path(tmp).write_bytes(b"PK half a checkpoint")
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            return _real(path, half)
    return _real(path, write)


atomic.write_file = write_file
'''


@pytest.mark.slow  # a tiny training (~40 s)
def test_a_full_disk_during_training_is_one_line_and_keeps_the_last_checkpoint(tiny_bert: Path, data_dir: Path,
                                                                               tmp_path: Path) -> None:
    import mlflow

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_FULL_DISK_AT_SECOND_CHECKPOINT)
    db, run_dir = tmp_path / "mlflow.db", tmp_path / "run"
    env = cli_env(data_dir, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(_train_args(tiny_bert, db, "train.max_steps=40", f"hydra.run.dir={run_dir}"), cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    checkpoint = RunDir(run_dir).checkpoint
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("cl-bench: error:")]
    assert errors == [f"cl-bench: error: could not save {checkpoint}: No space left on device (ENOSPC); the previous "
                      f"complete checkpoint.pt is kept unchanged at {checkpoint}"]
    assert hashlib.sha256(checkpoint.read_bytes()).hexdigest() == (run_dir / "kept.sha256").read_text()
    assert not [p.name for p in run_dir.iterdir() if ".tmp-" in p.name]  # no half file beside it
    assert json.loads(RunDir(run_dir).status.read_text())["status"] == "FAILED"
    run = mlflow.MlflowClient(f"sqlite:///{db}").get_run(RunDir(run_dir).run_id.read_text())
    assert run.info.status == "FAILED" and "No space left on device" in run.data.tags["error"]
