"""The metric-name contract (cl_bench/tracking/metric_names.py): one name per quantity, sections, the sample as
``.sample<N>``; and runs logged under the old flat names still read by the report, the sweep summary, cl-bench-sync
and the model card (an old-format run folder built here from the literal old names)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from cl_bench.tracking.metric_names import (
    HEADLINE_METRICS,
    final_name,
    final_names,
    flat_view,
    headline_names,
    parse_name,
    sample_of,
    select_name,
    upgrade_record,
)
from cl_bench.utils.rundir import RunDir


def test_names_carry_the_section_and_the_sample_of_the_families_it_acts_on() -> None:
    assert final_name("stsb") == "sts/stsb" and final_name("stsb", 300) == "sts/stsb.sample300"
    assert final_name("sts12_MSRpar", 300) == "sts/sts12_MSRpar.sample300"
    assert final_name("align", 300) == "geometry/align.sample300"
    assert final_name("mr", 300) == "transfer/mr"  # transfer accuracies are not sampled
    assert final_name("transfer_avg") == "transfer/transfer_avg" and final_name("mteb_STS12") == "mteb/mteb_STS12"
    assert final_name("eval_sample_pairs", 300) == "eval/eval_sample_pairs"
    assert select_name("stsb_dev") == "select/stsb_dev" and select_name("stsb_dev", 300) == "select/stsb_dev.sample300"
    assert select_name("best_stsb_dev", 300) == "select/best_stsb_dev.sample300"
    assert select_name("best_step", 300) == "select/best_step"
    assert select_name("best_transfer_dev_avg", 300) == "select/best_transfer_dev_avg"
    # the checkpoint-selection figure and the final evaluation's are distinct names
    assert select_name("stsb_dev") != final_name("stsb_dev")
    assert HEADLINE_METRICS == headline_names()
    assert headline_names(300) == ("sts/sts_avg.sample300", "sts/stsb.sample300", "transfer/transfer_avg",
                                   "geometry/align.sample300", "geometry/uniform.sample300",
                                   "select/best_stsb_dev.sample300")


def test_parse_name_reads_both_namings() -> None:
    parsed = parse_name("sts/stsb.sample300")
    assert (parsed.section, parsed.key, parsed.sample_pairs, parsed.legacy) == ("sts", "stsb", 300, False)
    assert (parsed.split, parsed.protocol) == ("test", "sample of 300 pairs")
    assert parse_name("select/best_stsb_dev").split == "dev" and parse_name("sts/stsb_dev").split == "dev"
    assert str(parse_name("stsb")) == "sts/stsb" and parse_name("stsb").legacy
    assert str(parse_name("best_stsb_dev")) == "select/best_stsb_dev"
    assert str(parse_name("train_loss")) == "train/loss" and str(parse_name("lr")) == "train/lr"
    assert str(parse_name("interrupted_at_step")) == "run/interrupted_at_step"
    assert str(parse_name("anisotropy_mean_cos")) == "geometry/anisotropy_mean_cos"
    for name in ("sts/stsb.sample300", "select/best_stsb_dev", "train/grad_norm", "geometry/align"):
        assert str(parse_name(name)) == name


# the literal old names: an eval=iterate run of before the sections (results.json and metrics.jsonl as written then)
OLD_RESULTS = {"stsb": 82.34, "stsb_dev": 85.53, "sickr": 70.1, "sickr_dev": 72.0, "sts_avg": 76.2, "align": 0.21,
               "uniform": -2.3, "eval_sample_pairs": 300.0, "best_stsb_dev": 86.87, "best_step": 4.0, "steps": 4.0,
               "skipped_steps": 0.0, "stopped_early": 0.0, "mr": 75.0, "pooler": "cls",
               "provenance": {"eval_pooler": "cls", "eval_truncate_dim": "all (no truncation)"}}
OLD_LINES = [
    {"step": 2, "time": 1.0, "train_loss": 1.5, "train_grad_norm": 2.0, "lr": 1e-5},
    {"step": 4, "time": 2.0, "stsb_dev": 86.87, "sickr_dev": 71.0, "sts_dev_avg": 78.9, "align_dev": 0.2, "epoch": 0},
    {"step": 4, "time": 3.0, **{k: v for k, v in OLD_RESULTS.items() if isinstance(v, float)}},
]


def _old_run(folder: Path, dropout: float, shift: float = 0.0) -> Path:
    folder.mkdir(parents=True)
    (folder / "params.json").write_text(json.dumps({"dropout": dropout, "seed": 42}))
    (folder / "tags.json").write_text(json.dumps({"mode": "train", "mlflow.runName": f"simcse dropout={dropout}"}))
    (folder / "status.json").write_text(json.dumps({"status": "FINISHED", "error": None, "time": 0.0}))
    results = {k: v + shift if isinstance(v, float) and k in ("stsb", "best_stsb_dev") else v
               for k, v in OLD_RESULTS.items()}
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in OLD_LINES))
    return folder


def test_an_old_record_is_read_under_the_current_names() -> None:
    named = upgrade_record({k: v for k, v in OLD_RESULTS.items() if k != "provenance"})
    # the old run's flat stsb_dev was the final evaluation's, on the 300-pair sample: not the selection figure
    assert named["sts/stsb_dev.sample300"] == 85.53 and named["select/best_stsb_dev"] == 86.87
    assert named["sts/stsb.sample300"] == 82.34 and named["geometry/align.sample300"] == 0.21
    assert named["transfer/mr"] == 75.0 and named["train/steps"] == 4.0 and named["pooler"] == "cls"
    assert "sts/stsb" not in named and "stsb_dev" not in named
    assert sample_of(named) == 300 and sample_of(named, "select") is None
    dev_line = upgrade_record(OLD_LINES[1], series=True)  # a dev evaluation of the old metrics.jsonl
    assert dev_line == {"step": 4, "time": 2.0, "select/stsb_dev": 86.87, "select/sickr_dev": 71.0,
                        "select/sts_dev_avg": 78.9, "select/align_dev": 0.2, "train/epoch": 0}
    assert upgrade_record(OLD_LINES[0], series=True)["train/loss"] == 1.5
    # the current names pass unchanged, and both namings give the same flat view
    assert upgrade_record(named) == named
    assert flat_view(named)["stsb"] == flat_view(OLD_RESULTS)["stsb"] == 82.34
    assert final_names({"stsb": 1.0, "pooler": "cls", "select/best_step": 2.0}, 300) == {
        "sts/stsb.sample300": 1.0, "pooler": "cls", "select/best_step": 2.0}


def test_an_old_format_sweep_folder_reads_like_a_new_one(tmp_path: Path) -> None:
    """The report and the sweep summary read a sweep logged under the old names: the same cells as the same runs
    logged under the new names, and the headings say the dev selection figure and the sample."""
    from cl_bench.reporting.report import (
        FINAL_SAMPLE,
        SELECT_SAMPLE,
        build_sweep_table,
        load_run_dirs,
        markdown_sweep,
    )

    old, new = tmp_path / "old", tmp_path / "new"
    for number, dropout in enumerate((0.0, 0.1)):
        _old_run(old / str(number), dropout, shift=number)
        job = _old_run(new / str(number), dropout, shift=number)
        results = json.loads((job / "results.json").read_text())
        named = {**upgrade_record({k: v for k, v in results.items() if k != "provenance"}),
                 "provenance": results["provenance"]}
        (job / "results.json").write_text(json.dumps(named))
    tables = {}
    for name, folder in (("old", old), ("new", new)):
        runs = load_run_dirs(folder)
        assert list(runs[FINAL_SAMPLE]) == [300, 300] and runs[SELECT_SAMPLE].isna().all()
        assert list(runs["metrics.best_stsb_dev"]) == [86.87, 87.87]
        assert list(runs["metrics.sts/stsb.sample300"]) == [82.34, 83.34]
        tables[name] = build_sweep_table(runs)
    assert tables["old"].metric == tables["new"].metric == "best_stsb_dev"
    assert list(tables["old"].points["mean"]) == list(tables["new"].points["mean"]) == [86.87, 87.87]
    assert markdown_sweep(tables["old"]) == markdown_sweep(tables["new"])
    text = markdown_sweep(tables["old"])
    assert "best_stsb_dev: dev, checkpoint selection (in-training dev evaluation), full (mean ± std)" in text
    assert "STS avg (test, final evaluation, sample of 300 pairs)" in text and "seeds n" in text


def test_cl_bench_sync_uploads_an_old_run_under_the_current_names(tmp_path: Path) -> None:
    import mlflow

    run_dir = _old_run(tmp_path / "run", 0.1)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = subprocess.run([sys.executable, "-m", "cl_bench.tracking.sync", str(run_dir), "--tracking-uri", uri],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    client = mlflow.MlflowClient(tracking_uri=uri)
    run = client.get_run(RunDir(run_dir).run_id.read_text().strip())
    metrics = run.data.metrics
    assert metrics["sts/stsb.sample300"] == 82.34 and metrics["sts/stsb_dev.sample300"] == 85.53
    assert metrics["select/best_stsb_dev"] == 86.87 and metrics["train/loss"] == 1.5
    # the selection series keeps its own name: its one point is the in-training figure, not the final one
    assert [m.value for m in client.get_metric_history(run.info.run_id, "select/stsb_dev")] == [86.87]
    assert not any("/" not in name for name in metrics), sorted(metrics)


def test_the_model_card_reads_both_namings() -> None:
    from cl_bench.commands.export import _group_metrics

    old = _group_metrics(OLD_RESULTS)
    new = _group_metrics(upgrade_record({k: v for k, v in OLD_RESULTS.items() if k != "provenance"}))
    assert old == new
    assert old["STS"]["sts/stsb.sample300"] == 82.34 and old["STS"]["select/best_stsb_dev"] == 86.87
    assert old["Transfer"] == {"transfer/mr": 75.0}
    assert not math.isnan(old["Other"]["train/steps"])


def test_the_names_module_is_torch_free() -> None:
    code = "import sys, cl_bench.tracking.metric_names as m; m.final_name('stsb', 3); print(sorted(n for n in " \
           "('torch', 'numpy', 'pandas') if n in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr[-2000:]


@pytest.mark.slow  # a 2-step training run through the command (~35 s of CPU)
def test_an_iterate_run_names_every_sampled_figure_as_such(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """eval=iterate (300 pairs per split): results.json, metrics.jsonl and MLflow hold the STS and geometry figures
    under `.sample300` names only, the selection series and the final evaluation's dev figure under two names."""
    import shutil

    import mlflow
    from conftest import cli_env

    done = subprocess.run(
        [shutil.which("cl-bench"), f"model.name_or_path={tiny_bert}", "eval=iterate", "data=wiki1m_head",
         "data.limit=32", "batch_size=8", "train.max_steps=2", "train.eval_steps=1", "train.log_steps=1",
         "train.progress_bar=false", "train.num_threads=1", "hydra.run.dir=run"],
        cwd=tmp_path, capture_output=True, text=True, env=cli_env(data_dir), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = {k: v for k, v in json.loads((tmp_path / "run" / "results.json").read_text()).items()
               if isinstance(v, float)}
    assert {"sts/stsb.sample300", "sts/stsb_dev.sample300", "geometry/align.sample300",
            "select/best_stsb_dev.sample300", "select/best_step", "eval/eval_sample_pairs"} <= set(results)
    assert not {"sts/stsb", "sts/stsb_dev", "geometry/align", "select/best_stsb_dev", "stsb", "stsb_dev"} & set(results)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines if "select/stsb_dev.sample300" in line] == [1, 2]
    assert len([line for line in lines if "sts/stsb_dev.sample300" in line]) == 1
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("cl-bench").experiment_id])
    assert {k: run.data.metrics[k] for k in results} == results  # MLflow holds the same names and values
    assert run.data.tags["mlflow.note.content"].startswith("sts/stsb.sample300 ")
