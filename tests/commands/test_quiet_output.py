"""Output that reads well where it lands: no transformers bars at every load and best-checkpoint save, progress
bars only on a terminal (plain lines in log files and pipes),
no MLflow store-creation chatter, and a sweep's parent run that carries its parameters and best point and whose
name fits MLflow's runs table."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import mlflow
import pytest
from tqdm import tqdm

from cl_bench.commands.sweep_callbacks import log_sweep_outcome, sweep_outcome
from cl_bench.models.encoder import build_encoder
from cl_bench.tracking.mlflow_logger import ensure_experiment, import_mlflow
from cl_bench.tracking.names import RUN_NAME_CHARS, sweep_run_name
from cl_bench.utils.progress import PlainProgress, on_terminal, progress_bar


def test_load_and_save_draw_no_progress_bars(tiny_bert: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    encoder = build_encoder(str(tiny_bert), pooler="cls")
    encoder.save(tmp_path / "best_model")
    build_encoder(str(tmp_path / "best_model"), pooler="cls", fresh_mlp=False)
    out, err = capfd.readouterr()
    for bar in ("Loading weights", "Writing model shards", "it/s]"):
        assert bar not in out + err
    from huggingface_hub.utils import are_progress_bars_disabled

    assert not are_progress_bars_disabled()  # the hub's download bars (fetching a model on first use) stay


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_bar_on_a_terminal_plain_lines_elsewhere() -> None:
    assert on_terminal(FakeTerminal()) and not on_terminal(io.StringIO())
    bar = progress_bar(10, "train", stream=FakeTerminal())
    assert isinstance(bar, tqdm)
    bar.close()
    assert isinstance(progress_bar(10, "train", stream=io.StringIO()), PlainProgress)
    off = progress_bar(10, "train", enabled=False, stream=io.StringIO())
    assert isinstance(off, tqdm) and off.disable  # train.progress_bar=false: nothing at all


def test_plain_progress_writes_a_line_per_interval_and_one_at_the_end() -> None:
    clock, lines = FakeClock(), []
    progress = PlainProgress(100, "train", unit="steps", write=lines.append, interval=30, clock=clock)
    for _ in range(50):
        clock.now += 1
        progress.update()
    assert len(lines) == 1 and lines[0].startswith("train: 30/100 steps (30%) in 00:30, 1 steps/s")
    progress.set_postfix(loss="0.25")
    progress.close()
    progress.close()
    assert len(lines) == 2 and lines[1] == "train: 50/100 steps (50%) in 00:50, 1 steps/s, loss=0.25"
    assert not any("\r" in line for line in lines)


def test_plain_progress_speaks_pooch_and_bytes() -> None:
    """pooch's downloader sets ``total``, updates, then resets and fills the count: one line at the end."""
    clock, lines = FakeClock(), []
    progress = PlainProgress(1, "wiki1m", unit="B", unit_scale=True, write=lines.append, clock=clock)
    assert progress  # pooch tests the bar's truth value
    progress.total = 3 * 1024 * 1024
    clock.now = 2.0
    progress.update(1024 * 1024)
    progress.reset()
    progress.update(3 * 1024 * 1024)
    progress.close()
    assert lines == ["wiki1m: 3.00MB/3.00MB (100%) in 00:02, 1.50MB/s"]


def test_no_store_creation_chatter_at_info(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    import_mlflow()
    capfd.readouterr()
    ensure_experiment(f"sqlite:///{tmp_path / 'mlflow.db'}", "cl-bench")
    err = capfd.readouterr().err
    assert "Creating initial MLflow database tables" not in err and "Updating database tables" not in err
    assert logging.getLogger("mlflow.store.db.utils").getEffectiveLevel() == logging.WARNING


@pytest.mark.parametrize(("keys", "name"), [
    (["dropout"], "sweep: dropout"),
    (["loss.tau", "dropout"], "sweep: tau × dropout"),
    (["method", "dropout"], "sweep: method×dropout"),  # "sweep: method × dropout" would be cut
    (["method", "dropout", "loss.tau", "train.lr"], "sweep: method …"),
    (["method.fixed_dropout_mask", "dropout"], "sweep: 2 keys"),
    ([], "sweep: 12-00-00"),
])
def test_parent_run_name_fits_the_runs_table(keys: list[str], name: str) -> None:
    assert sweep_run_name(keys, "12-00-00") == name and len(name) <= RUN_NAME_CHARS


def _sweep(root: Path) -> Path:
    """method × dropout, two seeds each; one job failed."""
    sweep, number = root / "sweep", 0
    for method, base in (("simcse", 70.0), ("diffcse", 72.0)):
        for dropout in (0.0, 0.1):
            for seed in (1, 2):
                job = sweep / str(number)
                job.mkdir(parents=True)
                params = {"method.name": method, "dropout": dropout, "seed": seed}
                (job / "params.json").write_text(json.dumps(params))
                (job / "tags.json").write_text(json.dumps({"overrides": f"method={method},dropout={dropout},seed={seed}"}))
                failed = number == 7
                score = {"select/best_stsb_dev": base + 10 * dropout + seed, "sts/sts_avg": base - 5 + seed}
                (job / "results.json").write_text(json.dumps({} if failed else score))
                (job / "status.json").write_text(json.dumps({"status": "FAILED" if failed else "FINISHED"}))
                number += 1
    return sweep


def test_parent_run_carries_the_sweeps_params_and_best_point(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    params, metrics, tags = sweep_outcome(sweep)
    assert params["dropout"] == "0, 0.1" and params["method.name"] == "simcse, diffcse"  # in the order the sweep ran them
    assert params["best.method.name"] == "diffcse" and params["best.dropout"] == "0.1"
    assert params["sweep.metric"] == "best_stsb_dev" and params["sweep.points"] == "4" and params["sweep.jobs"] == "8"
    assert tags["sweep.best_point"] == "dropout=0.1, method.name=diffcse"
    # diffcse at dropout 0.1: its one finished seed (seed 1, 72 + 1 + 1) beats diffcse at 0 (mean 73.5)
    assert metrics["select/best_stsb_dev"] == pytest.approx(74.0) and metrics["sweep/best_point_runs"] == 1
    assert metrics["sts/sts_avg"] == pytest.approx(68.0)
    assert "sweep/best_stsb_dev_std" not in metrics  # one seed: no spread to show
    assert metrics["sweep/finished_jobs"] == 7 and metrics["sweep/failed_jobs"] == 1

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.create_run(ensure_experiment(uri, "cl-bench"), run_name=sweep_run_name(["method.name", "dropout"], "x"))
    log_sweep_outcome(client, run.info.run_id, sweep)
    logged = client.get_run(run.info.run_id).data
    assert logged.params == params and logged.metrics == metrics
    assert logged.tags["sweep.best_point"] == tags["sweep.best_point"]
