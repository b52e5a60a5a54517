"""Paired significance: per-pair scores saved by the evaluation, the paired bootstrap (its coverage,
and that wrong resamplings fail the same check), Welch's test over seeds, ``cl-bench-report --compare``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import bootstrap, ttest_ind

from cl_bench.eval import EvalOptions, evaluate
from cl_bench.eval.pair_scores import load_pair_scores, save_pair_scores, spearman100, task_figure
from cl_bench.models.encoder import build_encoder
from cl_bench.reporting import significance
from cl_bench.reporting.report import main as report_main
from cl_bench.reporting.report import t_interval
from cl_bench.reporting.significance import (
    ZERO_VARIANCE,
    against_reference,
    bootstrap_p,
    compare,
    decimals_for,
    holm,
    mark,
    paired_bootstrap,
    seed_test,
)
from cl_bench.utils.rundir import RunDir


def _synthetic(rng: np.random.Generator, noise: float, gold: dict[str, dict[str, np.ndarray]]) -> dict:
    return {t: {p: (g + rng.normal(0.0, noise, len(g)), g) for p, g in parts.items()} for t, parts in gold.items()}


@pytest.fixture(scope="module")
def gold() -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return {"sts12": {"MSRpar": rng.uniform(0, 5, 150), "OnWN": rng.uniform(0, 5, 120)},
            "stsb": {"test": rng.uniform(0, 5, 200)}}


def test_pair_scores_are_saved_and_give_back_the_figures(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """The evaluation writes every STS test pair's similarity; rescoring them gives results.json's figures."""
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    results = evaluate(encoder, data_dir, tasks=["sts16"], out_dir=tmp_path,
                       options=EvalOptions(align_uniform=False, anisotropy=False, cache=False, backend="torch"))
    path = RunDir(tmp_path).pair_scores
    assert path.is_file() and path.stat().st_size < 100_000
    scores = load_pair_scores(path)
    assert set(scores) == {"sts16"} and len(scores["sts16"]) == 5
    system = {p: s for p, (s, _) in scores["sts16"].items()}
    gold = {p: g for p, (_, g) in scores["sts16"].items()}
    assert task_figure(system, gold) == results["sts16"]
    assert task_figure(system, gold, "wmean") == results["sts16_wmean"]


def test_a_run_against_itself_is_exactly_zero(gold: dict, tmp_path: Path) -> None:
    run = _synthetic(np.random.default_rng(2), 1.0, gold)
    table = paired_bootstrap([run], [run], n_resamples=50)
    assert (table["difference"] == 0).all() and (table["ci_low"] == 0).all() and (table["ci_high"] == 0).all()
    # the command line, on a run directory
    save_pair_scores(RunDir(tmp_path / "run").path.mkdir() or RunDir(tmp_path / "run").pair_scores, run)
    out = tmp_path / "cmp"
    assert report_main(["--compare", str(tmp_path / "run"), str(tmp_path / "run"), "--resamples", "50",
                        "--out", str(out)]) == 0
    saved = pd.read_csv(out / "compare_run_vs_run.csv")
    assert list(saved["task"]) == ["sts12", "stsb", "avg"] and (saved["p"] == 1).all() and (saved["p_holm"] == 1).all()
    assert (saved[["difference", "ci_low", "ci_high"]] == 0).all().all()


def test_a_real_difference_is_found_and_welch_is_scipys(gold: dict) -> None:
    rng = np.random.default_rng(3)
    better, worse = [_synthetic(rng, 0.8, gold) for _ in range(2)], [_synthetic(rng, 2.5, gold) for _ in range(3)]
    table = compare(better, worse, n_resamples=100).set_index("task")
    assert (table["ci_low"] > 0).all() and (table["difference"] > 0).all()
    figure = [[task_figure({p: s for p, (s, _) in run["stsb"].items()}, {p: g for p, (_, g) in run["stsb"].items()})
               for run in side] for side in (better, worse)]
    assert table.loc["stsb", "welch_p"] == pytest.approx(ttest_ind(*figure, equal_var=False).pvalue)
    assert table.loc["stsb", "a"] == pytest.approx(np.mean(figure[0]))
    assert math.isnan(seed_test([1.0], [2.0, 3.0])[1])


def test_holm_against_a_hand_computation() -> None:
    # m = 4: sorted 0.01, 0.02, 0.03, 0.04 -> 4·0.01 = 0.04, 3·0.02 = 0.06, 2·0.03 = 0.06 (max with 0.06), 1·0.04 → 0.06
    adjusted = holm([0.03, 0.01, 0.04, 0.02])
    assert list(adjusted) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    # a NaN is not tested: the family is the three others (3·0.01, 2·0.5 = 1, capped at 1)
    adjusted = holm([0.5, math.nan, 0.01, 0.9])
    assert math.isnan(adjusted[1]) and list(adjusted[[0, 2, 3]]) == pytest.approx([1.0, 0.03, 1.0])
    assert list(holm([0.2])) == [0.2]  # one test: unadjusted


def test_bootstrap_p_against_a_hand_computation() -> None:
    # 9 resampled differences, 2 of them <= 0: p = 2 (2 + 1) / (9 + 1) = 0.6
    assert bootstrap_p(np.array([-1.0, 0.0, 1, 2, 3, 4, 5, 6, 7])) == pytest.approx(0.6)
    # all above 0: the +1 keeps p above 0, 2 (0 + 1) / 1001
    assert bootstrap_p(np.arange(1.0, 1001.0)) == pytest.approx(2 / 1001)
    assert bootstrap_p(np.zeros(50)) == 1.0  # no difference at all
    assert decimals_for(0.04) == 1 and decimals_for(0.004) == 2 and decimals_for(0.3) == 0


def test_zero_variance_replicates_get_no_test_and_no_mark() -> None:
    assert all(math.isnan(v) for v in seed_test([75.0, 75.0], [75.5, 75.5]))
    marks = against_reference({"a": [75.0, 75.0], "ref": [75.5, 75.5], "b": [74.0, 74.2, 73.9]}, "ref")
    row = marks.set_index("point").loc["a"]
    assert row["test"] == ZERO_VARIANCE and math.isnan(row["p"]) and not row["significant"]
    assert mark(marks.iloc[0].to_dict()) == "-0.50"  # the difference, no star
    # the family is the one point tested (b): its Holm p is its own p
    b = marks.set_index("point").loc["b"]
    assert b["p_holm"] == pytest.approx(b["p"]) and b["p"] == pytest.approx(
        ttest_ind([74.0, 74.2, 73.9], [75.5, 75.5], equal_var=False).pvalue)


def test_marks_use_the_holm_adjusted_p_over_the_points() -> None:
    values = {"ref": [80.0, 80.2, 80.1], "x": [80.6, 80.9, 80.7], "y": [80.3, 79.8, 80.6], "z": [80.05, 80.25, 80.0]}
    marks = against_reference(values, "ref").set_index("point")
    raw = {k: ttest_ind(values[k], values["ref"], equal_var=False).pvalue for k in ("x", "y", "z")}
    assert list(marks.loc[["x", "y", "z"], "p_holm"]) == pytest.approx(list(holm(list(raw.values()))))
    assert mark({**marks.loc["x"].to_dict(), "test": "Welch t (seeds)"}).endswith("*") == (marks.loc["x", "p_holm"] < 0.05)


def test_null_sweeps_of_8_points_by_3_seeds_rarely_show_a_star() -> None:
    """No real difference anywhere: uncorrected, about one sweep in six shows some `*` (15.7% of these 300
    simulated sweeps); with Holm over the points, at most the 5% the family-wise level allows (1.3% here)."""
    rng = np.random.default_rng(11)
    any_raw = any_holm = 0
    sweeps = 300
    for _ in range(sweeps):
        values = {f"p{i}": list(rng.normal(80.0, 1.0, 3)) for i in range(8)}
        marks = against_reference(values, "p0")
        any_raw += bool((marks["p"] < 0.05).any())
        any_holm += bool(marks["significant"].any())
    assert any_raw / sweeps > 0.10 and any_holm / sweeps <= 0.05


def test_compare_labels_as_typed_one_file_each_and_the_one_seed_warning(gold: dict, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep dir's points named as on the command line (`method=simcse`) and as params (`method.name=...`)."""
    import json

    rng = np.random.default_rng(4)
    for number, (method, noise) in enumerate((("simcse", 0.8), ("sg_opt", 2.0))):
        job = RunDir(tmp_path / "sweep" / str(number))
        job.path.mkdir(parents=True)
        (job.path / "params.json").write_text(json.dumps({"method.name": method, "seed": 1}))
        (job.path / "tags.json").write_text(json.dumps({"overrides.task": json.dumps([f"method={method}"])}))
        (job.path / "results.json").write_text(json.dumps({"best_stsb_dev": 70.0 + number}))
        (job.path / "status.json").write_text(json.dumps({"status": "FINISHED"}))
        save_pair_scores(job.pair_scores, _synthetic(rng, noise, gold))
    out = tmp_path / "cmp"
    for a, b in (("method=simcse", "method=sg_opt"), ("method.name=simcse", "method=sg_opt")):
        assert report_main(["--sweep-dir", str(tmp_path / "sweep"), "--compare", a, b, "--resamples", "200",
                            "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["compare_method=simcse_vs_method=sg_opt.csv",
                                                     "compare_method=simcse_vs_method=sg_opt.md"]
    assert "WARNING: 1 seed(s) for method=simcse (fewer than 3)" in printed and "Holm p, mark" in printed
    assert "WARNING: 1 seed(s) for method=sg_opt (fewer than 3)" in printed
    assert "| avg    |    test |" in printed and "200 resamples, resampling seed 0" in printed
    saved = pd.read_csv(out / "compare_method=simcse_vs_method=sg_opt.csv")
    assert (saved["p_holm"] >= saved["p"]).all() and saved["resamples"].eq(200).all()
    # a second comparison is its own file
    assert report_main(["--sweep-dir", str(tmp_path / "sweep"), "--compare", "method=sg_opt", "method=simcse",
                        "--resamples", "50", "--out", str(out)]) == 0
    assert len(list(out.glob("compare_*.csv"))) == 2
    assert report_main(["--sweep-dir", str(tmp_path / "sweep"), "--compare", "method=nope", "method=simcse",
                        "--out", str(out)]) == 2


def _loop_bootstrap(a: list, b: list, tasks: list[str], aggregation: str, resamples: int, seed: int,
                    method: str = "percentile"):  # noqa: ANN202 (scipy's BootstrapResult)
    """The paired bootstrap as cl-bench computed it before it was vectorised: scipy resampling the pairs and the
    statistic computed one resample at a time, each task's figure from the ranks of the resampled arrays."""
    flat = significance._flatten(a, b, tasks)
    n_a = len(flat.a)

    def statistic(group: np.ndarray, gold: np.ndarray, *systems: np.ndarray) -> np.ndarray:
        diff = (significance._figures(flat, group, gold, systems[:n_a], aggregation)
                - significance._figures(flat, group, gold, systems[n_a:], aggregation))
        return np.append(diff, diff.mean())

    return bootstrap((flat.group, flat.gold, *flat.a, *flat.b), statistic, paired=True, vectorized=False,
                     n_resamples=resamples, method=method, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("aggregation", ["all", "mean", "wmean"])
def test_the_vectorised_bootstrap_draws_the_loops_resamples_and_equals_it(aggregation: str) -> None:
    """Same seed, same resamples, same statistic: the vectorised bootstrap's distribution is the per-resample
    loop's (equal to 1e-9: the rank sums are exact, only the weighted mean over parts sums in another order),
    so are its interval and p; two seeds on one side, three on the other, ties in the gold and the similarities,
    and a resample count that is not a multiple of the batch."""
    rng = np.random.default_rng(6)
    gold = {"sts12": {"MSRpar": np.round(rng.uniform(0, 5, 60), 1), "OnWN": np.round(rng.uniform(0, 5, 40), 1),
                      "FNWN": np.round(rng.uniform(0, 5, 7), 1)},
            "stsb": {"test": np.round(rng.uniform(0, 5, 90), 1)}}

    def run(noise: float) -> dict:
        return {t: {p: (np.round(g + rng.normal(0.0, noise, len(g)), 1), g) for p, g in parts.items()}
                for t, parts in gold.items()}

    a, b = [run(0.8) for _ in range(2)], [run(1.5) for _ in range(3)]
    resamples = significance.BOOTSTRAP_BATCH + 37
    loop = _loop_bootstrap(a, b, ["sts12", "stsb"], aggregation, resamples, seed=9)
    table = paired_bootstrap(a, b, ["sts12", "stsb"], n_resamples=resamples, seed=9, aggregation=aggregation)
    flat = significance._flatten(a, b, ["sts12", "stsb"])
    fast = bootstrap((np.arange(len(flat.gold)),), significance._ResampledSpearman(flat, aggregation), paired=True,
                     vectorized=True, batch=significance.BOOTSTRAP_BATCH, n_resamples=resamples, method="percentile",
                     rng=np.random.default_rng(9))
    assert np.allclose(fast.bootstrap_distribution, loop.bootstrap_distribution, rtol=0, atol=1e-9, equal_nan=True)
    assert list(table["ci_low"]) == pytest.approx(list(loop.confidence_interval.low), abs=1e-9, nan_ok=True)
    assert list(table["ci_high"]) == pytest.approx(list(loop.confidence_interval.high), abs=1e-9, nan_ok=True)
    assert list(table["p"]) == pytest.approx([bootstrap_p(d) for d in loop.bootstrap_distribution], nan_ok=True)
    assert (table["resample_seed"] == 9).all() and (table["resamples"] == resamples).all()


def test_the_vectorised_bca_interval_equals_the_loops() -> None:
    """``method="BCa"`` also runs the statistic on scipy's jackknife resamples (batches of pair indices)."""
    rng = np.random.default_rng(8)
    g = np.round(rng.uniform(0, 5, 80), 1)
    a, b = [{"stsb": {"test": (g + rng.normal(0, 1.0, 80), g)}}], [{"stsb": {"test": (g + rng.normal(0, 1.4, 80), g)}}]
    loop = _loop_bootstrap(a, b, ["stsb"], "all", 120, seed=3, method="BCa")
    table = paired_bootstrap(a, b, ["stsb"], n_resamples=120, seed=3, method="BCa")
    assert list(table["ci_low"]) == pytest.approx(list(loop.confidence_interval.low), abs=1e-9, nan_ok=True)
    assert list(table["ci_high"]) == pytest.approx(list(loop.confidence_interval.high), abs=1e-9, nan_ok=True)


def test_resampled_spearman_of_one_resample_is_spearmanr_of_the_resampled_pairs() -> None:
    """Against scipy directly: one resample's counts-weighted rank correlation is ``spearmanr`` of the drawn pairs
    (duplicates and ties included); a slice drawn fewer than twice, or constant, gives NaN."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(12)
    g = np.round(rng.uniform(0, 5, 50), 0)
    sa, sb = np.round(g + rng.normal(0, 1, 50), 1), g + rng.normal(0, 2, 50)
    flat = significance._flatten([{"stsb": {"test": (sa, g)}}], [{"stsb": {"test": (sb, g)}}], ["stsb"])
    statistic = significance._ResampledSpearman(flat, "all")
    drawn = rng.integers(0, 50, (4, 50))
    values = statistic(drawn)
    for row, i in enumerate(drawn):
        expected = (spearmanr(sa[i], g[i])[0] - spearmanr(sb[i], g[i])[0]) * 100
        assert values[0, row] == pytest.approx(expected, abs=1e-9) and values[1, row] == values[0, row]
    assert statistic(np.arange(50))[0] == pytest.approx((spearmanr(sa, g)[0] - spearmanr(sb, g)[0]) * 100, abs=1e-9)
    assert np.isnan(statistic(np.full((1, 50), 7))).all()  # one pair drawn 50 times: constant, no Spearman


def test_t_interval_is_students() -> None:
    values = [80.0, 81.0, 83.0]
    low, high = t_interval(values)
    half = 4.302652729911275 * np.std(values, ddof=1) / math.sqrt(3)  # t(0.975, df=2)
    assert (low, high) == pytest.approx((np.mean(values) - half, np.mean(values) + half))
    assert all(math.isnan(v) for v in t_interval([80.0]))


# ------------------------------------------------------------------------------------------------
# Coverage: 200 simulated test sets drawn from a population with a known difference
# ------------------------------------------------------------------------------------------------
POPULATION, SAMPLE, REPLICATES, RESAMPLES = 200_000, 200, 200, 200


def _population(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Gold scores and two strongly correlated encoders (B = A + noise): the paired interval is much
    narrower than an unpaired one, and the truth is far from 0."""
    gold = rng.uniform(0, 5, POPULATION)
    a = gold + rng.normal(0, 1.0, POPULATION)
    b = a + rng.normal(0, 0.6, POPULATION)
    return gold, a, b, spearman100(a, gold) - spearman100(b, gold)


def _coverage(kind: str) -> float:
    rng = np.random.default_rng(0)
    gold, a, b, truth = _population(rng)
    covered = 0
    for replicate in range(REPLICATES):
        pick = rng.choice(POPULATION, SAMPLE, replace=False)
        g, sa, sb = gold[pick], a[pick], b[pick]
        if kind == "paired":
            row = paired_bootstrap([{"t": {"x": (sa, g)}}], [{"t": {"x": (sb, g)}}], n_resamples=RESAMPLES,
                                   seed=replicate).iloc[0]
            low, high = row["ci_low"], row["ci_high"]
        else:
            index = np.arange(SAMPLE)
            if kind == "unpaired":  # A's pairs and B's pairs resampled independently
                def statistic(i: np.ndarray, j: np.ndarray, sa=sa, sb=sb, g=g) -> float:  # noqa: ANN001
                    return spearman100(sa[i], g[i]) - spearman100(sb[j], g[j])
            else:  # "gold apart": systems' pairs and gold scores resampled separately
                def statistic(i: np.ndarray, j: np.ndarray, sa=sa, sb=sb, g=g) -> float:  # noqa: ANN001
                    return spearman100(sa[i], g[j]) - spearman100(sb[i], g[j])
            ci = bootstrap((index, index), statistic, paired=False, vectorized=False, n_resamples=RESAMPLES,
                           method="percentile", rng=np.random.default_rng(replicate)).confidence_interval
            low, high = ci.low, ci.high
        covered += low <= truth <= high
    return covered / REPLICATES


@pytest.mark.slow
def test_paired_bootstrap_covers_the_truth_95_percent_and_wrong_resamplings_do_not() -> None:
    """Tolerance [0.90, 0.99] (the binomial sd at 200 replicates is 1.5 points): the paired bootstrap is
    inside; resampling A and B unpaired (too wide: ~100%) or the gold apart from the pairs (centred
    near 0: far below) is outside. About 25 s on a loaded 2-core machine (2026-11-27)."""
    assert 0.90 <= _coverage("paired") <= 0.99
    assert _coverage("unpaired") > 0.99
    assert _coverage("gold apart") < 0.90


def test_spearman100_is_scipys_spearmanr() -> None:
    """The fast rank correlation the bootstrap relies on equals scipy.stats.spearmanr, ties included."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(5)
    for n in (2, 3, 17, 500, 3000):
        system, gold = rng.normal(size=n), np.round(rng.uniform(0, 5, n), 1)
        system[::5] = system[0]  # ties on both sides
        assert spearman100(system, gold) == pytest.approx(spearmanr(system, gold)[0] * 100, abs=1e-9)
    assert math.isnan(spearman100(np.ones(5), np.arange(5.0)))


# ------------------------------------------------------------------------------------------------
# End to end: a 2-point x 3-seed sweep on the tiny model, its report, and --compare of its runs
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_two_point_three_seed_sweep_report_and_compare(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """`cl-bench experiment=ablation_dropout seeds=3` on two points (tiny BERT, 2 steps), then
    `cl-bench-report`: CI columns, marks against dropout=0.1, provenance; the parent run carries the
    files; `--compare` of two runs equals a recomputation from their saved pair scores."""
    import json
    import shutil
    import subprocess

    import mlflow
    from conftest import cli_env

    env = cli_env(data_dir)
    sweep = subprocess.run(
        [shutil.which("cl-bench"), "experiment=ablation_dropout", f"model.name_or_path={tiny_bert}",
         "+experiment/points=dropout_0.0,dropout_0.1", "seeds=3", "data=wiki1m_head", "data.limit=32",
         "train.batch_size=8", "train.max_steps=2", "train.eval_steps=2", "train.num_threads=1",
         "train.progress_bar=false", "eval.tasks=[stsb]", "eval.anisotropy=false", "hydra.sweep.dir=sweep"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=1500,
    )
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-5000:]
    jobs = sorted((tmp_path / "sweep").glob("*/results.json"))
    assert len(jobs) == 6
    results = {job.parent: json.loads(job.read_text()) for job in jobs}
    provenance = next(iter(results.values()))["provenance"]
    assert provenance["eval_mlp"] == "dropped" and provenance["mlp_dropped"] == "true"
    assert provenance["dev_metric"] == "stsb_dev" and provenance["global_batch"] == "8"
    assert provenance["processes"] == "1" and provenance["aggregation"].startswith("all")
    assert all(RunDir(d).pair_scores.is_file() for d in results)

    # replicates grouped in MLflow: one `point` tag per grid point, three runs (seeds 42-44) each
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("ablation_dropout")
    # the children: a filter `tags.sweep.parent != 'true'` would return none (MLflow's tag filters drop the
    # runs that lack the tag, and only the parent has it), so the parent's id tells them apart
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`sweep.parent` = 'true'")
    children = client.search_runs([experiment.experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert len(children) == 6
    by_point: dict[str, list[str]] = {}
    for run in children:
        by_point.setdefault(run.data.tags["point"], []).append(run.data.params["seed"])
    assert sorted(map(sorted, by_point.values())) == [["42", "43", "44"]] * 2
    assert all(run.data.tags["provenance.eval_pooler"] == "cls" for run in children)

    report = subprocess.run(
        [shutil.which("cl-bench-report"), "--experiment", "ablation_dropout", "--out", "report", "--resamples", "100"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900,
    )
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    table = pd.read_csv(tmp_path / "report" / "sweep.csv").set_index("point")
    assert list(table.index) == ["dropout=0", "dropout=0.1"] and list(table["n"]) == [3, 3]
    seeds = {label: [r["select/best_stsb_dev"] for d, r in results.items()
                     if json.loads((d / "params.json").read_text())["dropout"] == value]
             for label, value in (("dropout=0", 0.0), ("dropout=0.1", 0.1))}
    low, high = t_interval(seeds["dropout=0"])
    assert (table.loc["dropout=0", "ci95_low"], table.loc["dropout=0", "ci95_high"]) == pytest.approx((low, high))
    assert table.loc["dropout=0.1", "vs_reference"] == "ref" and table.loc["dropout=0", "test_ref"] == "Welch t (seeds)"
    assert table.loc["dropout=0", "p_ref"] == pytest.approx(ttest_ind(seeds["dropout=0"], seeds["dropout=0.1"],
                                                                      equal_var=False).pvalue)
    text = (tmp_path / "report" / "report.md").read_text()
    # the paper comparison's setting line: the batch that trained (train.batch_size=8), not the shortcut's 64
    assert "steps 2, batch 8;" in report.stdout
    assert "95% CI (t, over seeds)" in text and "Reference: `dropout=0.1`" in text and "What the figures were measured with" in text
    attached = {Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report.md", "sweep.csv", "runs.csv", "sweep.png"} <= attached

    # --compare of two MLflow runs = the paired bootstrap recomputed from their saved pair scores
    run_a, run_b = children[0], next(r for r in children if r.data.tags["point"] != children[0].data.tags["point"])
    compared = subprocess.run(
        [shutil.which("cl-bench-report"), "--compare", run_a.info.run_id, run_b.info.run_id, "--resamples", "100",
         "--out", "cmp", "--tracking-uri", uri],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600,
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    (printed_path,) = (tmp_path / "cmp").glob("compare_*.csv")
    printed = pd.read_csv(printed_path)
    scores = [load_pair_scores(RunDir(r.data.tags["run_dir"]).pair_scores) for r in (run_a, run_b)]
    expected = paired_bootstrap([scores[0]], [scores[1]], n_resamples=100)
    expected = expected[expected["task"] != "avg"]  # one task (eval.tasks=[stsb]): its average is the same test
    for column in ("a", "b", "difference", "ci_low", "ci_high"):
        assert list(printed[column]) == pytest.approx(list(expected[column]), abs=1e-12), column
    assert printed.loc[0, "a"] == pytest.approx(json.loads((Path(run_a.data.tags["run_dir"]) / "results.json")
                                                           .read_text())["sts/stsb"], abs=1e-9)
    assert f"{printed.loc[0, 'difference']:+.2f}" in compared.stdout
    # a run against itself, by its MLflow id: exactly 0, CI [0, 0]
    itself = subprocess.run(
        [shutil.which("cl-bench-report"), "--compare", run_a.info.run_id, run_a.info.run_id, "--resamples", "50",
         "--out", "cmp_self", "--tracking-uri", uri],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600,
    )
    assert itself.returncode == 0, itself.stderr[-3000:]
    (saved_path,) = (tmp_path / "cmp_self").glob("compare_*.csv")
    saved = pd.read_csv(saved_path)
    assert (saved[["difference", "ci_low", "ci_high"]] == 0).all().all() and list(saved["task"]) == ["stsb"]
    # point labels of the sweep: three seeds a side, so Welch's test too
    compared = subprocess.run(
        [shutil.which("cl-bench-report"), "--experiment", "ablation_dropout", "--compare", "dropout=0", "dropout=0.1",
         "--resamples", "50", "--out", "cmp_points"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600,
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    points = pd.read_csv(tmp_path / "cmp_points" / "compare_dropout=0_vs_dropout=0.1.csv")
    assert list(points["n_a"]) == [3] and points["welch_p"].notna().all()
    assert list(points["welch_p_holm"]) == pytest.approx(list(holm(list(points["welch_p"]))))
    assert "Welch p (seeds)" in compared.stdout and "WARNING" not in compared.stdout  # 3 seeds, same settings
