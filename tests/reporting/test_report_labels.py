"""Every table says what its figures were computed on (issue 47): the sweep and reference tables head each column
with its split, protocol and seeds, a one-seed Δ sits beside the interval and p of that same quantity; --compare
warns when and only when a side ran on a sample, has fewer than 3 seeds, or the sides differ in an evaluation
setting; Holm's family counts distinct tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cl_bench.eval.pair_scores import save_pair_scores, spearman100
from cl_bench.reporting.report import load_run_dirs, markdown_reference, markdown_sweep, write_report
from cl_bench.reporting.report import main as report_main
from cl_bench.reporting.significance import FULL, compare, compare_notes, holm, markdown_compare
from cl_bench.utils.rundir import RunDir

PROVENANCE = {"eval_truncate_dim": "all (no truncation)", "eval_postprocess": "none", "eval_pooler": "cls",
              "eval_precision": "fp32", "eval_backend": "torch"}


def _cells(markdown: str) -> list[dict[str, str]]:
    """A pipe table's rows as {heading: cell} (both stripped)."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return [dict(zip(split[0], row, strict=True)) for row in split[2:]]


def _job(folder: Path, method: str, seed: int, results: dict, scores: dict, provenance: dict | None = None) -> Path:
    job = RunDir(folder)
    job.path.mkdir(parents=True)
    (job.path / "params.json").write_text(json.dumps({"method.name": method, "seed": seed}))
    (job.path / "tags.json").write_text(json.dumps({"overrides.task": json.dumps([f"method={method}"])}))
    (job.path / "results.json").write_text(json.dumps({**results, "provenance": provenance or PROVENANCE}))
    (job.path / "status.json").write_text(json.dumps({"status": "FINISHED"}))
    save_pair_scores(job.pair_scores, scores)
    return job.path


@pytest.fixture(scope="module")
def gold() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {"dev": rng.uniform(0, 5, 300), "test": rng.uniform(0, 5, 400)}


def _scores(rng: np.random.Generator, gold: dict[str, np.ndarray], dev_noise: float, test_noise: float) -> dict:
    return {"stsb_dev": {"dev": (gold["dev"] + rng.normal(0, dev_noise, 300), gold["dev"])},
            "stsb": {"test": (gold["test"] + rng.normal(0, test_noise, 400), gold["test"])}}


def test_a_one_seed_sweep_report_labels_each_cell_and_centres_each_interval_on_its_delta(
        gold: dict[str, np.ndarray], tmp_path: Path) -> None:
    """The issue's case: eval=iterate (a 300-pair sample), one seed a point, the selection figure ranked. The Δ on
    the one-seed row is the difference of the figure its interval and p are computed on (the final evaluation's
    stsb_dev on the sampled pairs, recomputed from the pair scores), not the dev mean's beside another's interval."""
    rng = np.random.default_rng(5)
    scores = {"simcse": _scores(rng, gold, 1.0, 1.0), "sg_opt": _scores(rng, gold, 0.7, 1.3)}
    figures = {m: {t: spearman100(*s[t][p]) for t, p in (("stsb_dev", "dev"), ("stsb", "test"))} for m, s in scores.items()}
    dev = {"simcse": 86.87, "sg_opt": 86.90}  # the in-training selection figures (their Δ: +0.03)
    for number, method in enumerate(("simcse", "sg_opt")):
        _job(tmp_path / "sweep" / str(number), method, 42, {
            "select/best_stsb_dev.sample300": dev[method], "select/best_step": 4.0,
            "sts/stsb_dev.sample300": figures[method]["stsb_dev"], "sts/stsb.sample300": figures[method]["stsb"],
            "eval/eval_sample_pairs": 300.0}, scores[method])
    report = write_report(load_run_dirs(tmp_path / "sweep"), tmp_path / "out", reference="method=simcse",
                          resamples=300)
    assert report.sweep.metric == "best_stsb_dev"
    rows = {r["method"]: r for r in _cells(markdown_sweep(report.sweep))}
    value = "best_stsb_dev: dev, checkpoint selection (in-training dev evaluation), sample of 300 pairs (mean ± std)"
    assert float(rows["simcse"][value]) == 86.87 and float(rows["sg_opt"][value]) == 86.90
    assert rows["sg_opt"]["seeds n"] == "1" and rows["sg_opt"]["95% CI (t, over seeds)"] == "—"
    assert rows["sg_opt"]["STS avg (test, final evaluation, sample of 300 pairs)"] == "—"  # no sts_avg: no figure
    delta = figures["sg_opt"]["stsb_dev"] - figures["simcse"]["stsb_dev"]
    assert abs(delta - 0.03) > 0.05  # the pairs' figure differs from the selection figure: the test can tell them apart
    assert rows["sg_opt"]["Δ vs reference (this metric, seeds)"] == "—"
    assert rows["sg_opt"]["Δ vs reference (1 seed: Δ of)"].startswith(f"{delta:+.2f}")
    assert rows["sg_opt"]["Δ vs reference (1 seed: Δ of)"].endswith("(stsb_dev, dev, 300 pairs)")
    marks = {r["point"]: r for r in _cells(markdown_reference(report.marks, report.reference, report.reference_why,
                                                             report.sweep.metric))}
    row = marks["method=sg_opt"]
    assert row["Δ of"] == "stsb_dev, dev, 300 pairs" and row["Δ vs reference (seeds)"] == "—"
    assert row["Δ vs reference (1 seed, on the pairs)"].startswith(f"{delta:+.2f}")
    low, high = (float(v) for v in row["95% CI of Δ"].strip("[]").split(","))
    assert low < delta < high and abs((low + high) / 2 - delta) < (high - low) / 4  # the interval is about its Δ
    assert row["test"] == "paired bootstrap (dev pairs; one seed)" and marks["method=simcse"]["test"] == "reference"
    text = (tmp_path / "out" / "report.md").read_text()
    assert "`best_stsb_dev` (dev, checkpoint selection (in-training dev evaluation), sample of 300 pairs)" in text


def _settings(**changed: str) -> dict[str, str]:
    return {"sample": FULL, **PROVENANCE, **changed}


def _table(n_a: int, n_b: int, gold: dict[str, np.ndarray]) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    a = [_scores(rng, gold, 1.0, 1.0) for _ in range(n_a)]
    b = [_scores(rng, gold, 1.2, 1.2) for _ in range(n_b)]
    return compare(a, b, ["stsb"], n_resamples=100)


def test_compare_warns_when_and_only_when_its_condition_holds(gold: dict[str, np.ndarray]) -> None:
    three = _table(3, 3, gold)
    same = [_settings()] * 3
    assert not [line for line in compare_notes(three, "A", "B", same, same) if line.startswith("WARNING")]
    # a side on a sample: that side is named, and the sides differ in the sample
    sampled = [_settings(sample="300")] * 3
    warnings = [line for line in compare_notes(three, "A", "B", sampled, same) if line.startswith("WARNING")]
    assert len(warnings) == 2 and warnings[0].startswith("WARNING: A ran on a sample of 300 pairs per split")
    assert warnings[1].startswith("WARNING: the sides differ in sample (eval.sample_pairs): A: 300; B: full")
    # both on the same sample: the sample warning per side, no difference
    warnings = [line for line in compare_notes(three, "A", "B", sampled, sampled) if line.startswith("WARNING")]
    assert [w.split(" ran ")[0] for w in warnings] == ["WARNING: A", "WARNING: B"]
    # fewer than 3 seeds on one side: that side only
    two = _table(2, 3, gold)
    warnings = [line for line in compare_notes(two, "A", "B", same[:2], same) if line.startswith("WARNING")]
    assert warnings == [w for w in warnings if w.startswith("WARNING: 2 seed(s) for A (fewer than 3)")] and warnings
    # every evaluation setting, one at a time: exactly one warning, naming it
    for name, what in (("eval_truncate_dim", "truncation"), ("eval_postprocess", "post-processing"),
                       ("eval_pooler", "pooler"), ("eval_precision", "precision"), ("eval_backend", "backend")):
        other = [_settings(**{name: "changed"})] * 3
        warnings = [line for line in compare_notes(three, "A", "B", same, other) if line.startswith("WARNING")]
        assert len(warnings) == 1 and warnings[0].startswith(f"WARNING: the sides differ in {what}"), (name, warnings)


def test_compare_warnings_reach_the_console_and_the_file(gold: dict[str, np.ndarray], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(8)
    a = _job(tmp_path / "a", "simcse", 1, {"sts/stsb.sample300": 80.0, "eval/eval_sample_pairs": 300.0},
             _scores(rng, gold, 1.0, 1.0))
    b = _job(tmp_path / "b", "simcse", 1, {"sts/stsb": 80.0}, _scores(rng, gold, 1.0, 1.0),
             {**PROVENANCE, "eval_precision": "bf16"})
    assert report_main(["--compare", str(a), str(b), "--resamples", "50", "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    written = (tmp_path / "cmp" / "compare_a_vs_b.md").read_text()
    for text in (printed, written):
        assert "WARNING: a ran on a sample of 300 pairs per split" in text
        assert "WARNING: the sides differ in precision (eval.precision): a: fp32; b: bf16" in text
        assert "WARNING: 1 seed(s) for a (fewer than 3)" in text and "WARNING: 1 seed(s) for b (fewer than 3)" in text
        assert "WARNING: b ran on a sample" not in text
        assert "A: a (seeds n=1; sample of 300 pairs)" in text and "B: b (seeds n=1; full protocol)" in text
        assert text.count("Holm family:") == 1


def test_holm_family_is_the_distinct_tests(gold: dict[str, np.ndarray]) -> None:
    one = _table(2, 2, gold)
    assert list(one["task"]) == ["stsb"]  # one task: its average is the same test, not a second member
    assert list(one["p_holm"]) == list(one["p"])
    assert "Holm family: 1 distinct test(s) per test kind (1 task(s): stsb)" in compare_notes(one, "A", "B")[1]
    rng = np.random.default_rng(4)
    a = [_scores(rng, gold, 1.0, 1.0) for _ in range(2)]
    b = [_scores(rng, gold, 1.5, 1.5) for _ in range(2)]
    both = compare(a, b, ["stsb", "stsb_dev"], n_resamples=100)
    assert list(both["task"]) == ["stsb_dev", "stsb", "avg"]  # in the runs' order
    assert list(both["p_holm"]) == pytest.approx(list(holm(both["p"])))
    assert "3 distinct test(s) per test kind (2 task(s) and their average" in compare_notes(both, "A", "B")[1]
    shown = _cells(markdown_compare(both, "A", "B"))
    assert [r["split"] for r in shown] == ["dev", "test", "dev + test"] and [r["pairs"] for r in shown] == ["300", "400", "700"]


def test_a_key_one_method_lacks_prints_as_a_dash_with_the_reason(tmp_path: Path) -> None:
    from cl_bench.reporting.report import build_sweep_table, sweep_notes

    for number, (method, extra) in enumerate((("simcse", {}), ("sbert", {"loss.objective": "softmax"}))):
        job = tmp_path / "sweep" / str(number)
        job.mkdir(parents=True)
        (job / "params.json").write_text(json.dumps({"method.name": method, "seed": 1, **extra}))
        (job / "tags.json").write_text(json.dumps({"overrides.task": json.dumps([f"method={method}"])}))
        (job / "results.json").write_text(json.dumps({"select/best_stsb_dev": 80.0 + number}))
        (job / "status.json").write_text(json.dumps({"status": "FINISHED"}))
    table = build_sweep_table(load_run_dirs(tmp_path / "sweep"))
    assert table.consequences["loss.objective"] == "— (method=simcse: no such key in that config); softmax (method=sbert)"
    assert "nan" not in "\n".join(sweep_notes(table))


@pytest.mark.parametrize(("values", "fmt"), [(("simcse", "esimcse"), "o"), ((0.0, 0.1), "o-")])
def test_sweep_png_joins_points_only_along_a_numeric_key(values: tuple, fmt: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Two methods are categories (points, no line between them); dropout 0 -> 0.1 is a number line."""
    import matplotlib.axes

    from cl_bench.reporting.report import build_sweep_table, plot_sweep

    key = "method" if isinstance(values[0], str) else "dropout"
    for number, value in enumerate(values):
        job = tmp_path / "sweep" / str(number)
        job.mkdir(parents=True)
        (job / "params.json").write_text(json.dumps({key: value, "seed": 1}))
        (job / "tags.json").write_text(json.dumps({"overrides.task": json.dumps([f"{key}={value}"])}))
        (job / "results.json").write_text(json.dumps({"select/best_stsb_dev": 86.9 - number / 100}))
        (job / "status.json").write_text(json.dumps({"status": "FINISHED"}))
    drawn: list[str] = []
    original = matplotlib.axes.Axes.errorbar
    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar",
                        lambda self, *a, **k: drawn.append(k.get("fmt")) or original(self, *a, **k))
    assert plot_sweep(build_sweep_table(load_run_dirs(tmp_path / "sweep")), tmp_path / "sweep.png").is_file()
    assert drawn == [fmt]
