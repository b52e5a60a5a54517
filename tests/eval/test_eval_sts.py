"""STS evaluation: SentEval-format readers, the three aggregations, geometry metrics, whitening,
the single encode call, task validation and the result table (small fixtures, no real data)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import HashEncoder, write_sts_fixture

from cl_bench.data.senteval import (
    read_sick_split,
    read_sts_subset,
    read_stsb_split,
)
from cl_bench.data.text import DataFileError
from cl_bench.eval import (
    EvalConfigError,
    EvalOptions,
    check_eval_config,
    evaluate,
    evaluate_dev,
    format_table,
    resolve_tasks,
)
from cl_bench.eval.geometry import (
    Whitening,
    alignment,
    anisotropy_metrics,
    mean_pairwise_cosine,
    uniformity,
)
from cl_bench.eval.registry import ScoreOptions, score_task
from cl_bench.eval.sts import aggregate_subsets


@pytest.fixture(scope="module")
def sts_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sts_fixture(tmp_path_factory.mktemp("senteval_sts"))


class TableEncoder:
    """Looks sentences up in a fixed table."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def encode(self, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
        return np.asarray([self.table[s] for s in sentences], dtype=np.float32)


# ------------------------------------------------------------------------------------------------
# Readers
# ------------------------------------------------------------------------------------------------
def test_sts_subset_reader_skips_unscored_pairs_and_rejoins_words(tmp_path: Path) -> None:
    (tmp_path / "STS.input.x.txt").write_text("a  man\tplays  guitar \nskip me\tplease\n the cat \tsits\n")
    (tmp_path / "STS.gs.x.txt").write_text("4.2\n\n1\n")
    pairs = read_sts_subset(tmp_path, "x")
    assert pairs.sent1 == ("a man", "the cat")
    assert pairs.sent2 == ("plays guitar", "sits")
    assert pairs.gold.tolist() == [4.2, 1.0]


def test_sts_subset_reader_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "STS.input.x.txt").write_text("a\tb\na\tb\tc\n")
    (tmp_path / "STS.gs.x.txt").write_text("1\n2\n")
    with pytest.raises(DataFileError, match=r"STS\.input\.x\.txt:2: expected 2 tab-separated"):
        read_sts_subset(tmp_path, "x")
    (tmp_path / "STS.input.x.txt").write_text("a\tb\n")
    with pytest.raises(DataFileError, match=r"STS\.gs\.x\.txt: 2 lines, but STS\.input\.x\.txt has 1"):
        read_sts_subset(tmp_path, "x")


def test_stsb_and_sick_readers(sts_root: Path) -> None:
    test = read_stsb_split(sts_root / "sts/STSBenchmark/sts-test.csv")
    assert len(test) == 16 and test.gold[0] == 4.5
    sick = read_sick_split(sts_root / "sts/SICK/SICK_test_annotated.txt")  # CRLF, header row
    assert len(sick) == 8
    assert not any("\r" in text for text in (*sick.sent1, *sick.sent2))
    assert all(1.0 <= g <= 5.0 for g in sick.gold)


# ------------------------------------------------------------------------------------------------
# Aggregations against a hand computation
# ------------------------------------------------------------------------------------------------
def test_three_aggregations_match_hand_computation() -> None:
    # subset A: perfectly ordered -> rho 1. subset B: ranks (3,1,2,4) vs (1,2,3,4): sum d^2 = 6,
    # rho = 1 - 6*6 / (4*15) = 0.4. Concatenation (ties -> mid-ranks): rank vectors
    # (1.5,3.5,5.5,5.5,1.5,3.5,7) and (1.5,3.5,5.5,1.5,3.5,5.5,7): covariance sum 14.5, variances 26.5.
    system = {"A": np.array([0.1, 0.2, 0.3]), "B": np.array([0.3, 0.1, 0.2, 0.4])}
    gold = {"A": np.array([1.0, 2.0, 3.0]), "B": np.array([1.0, 2.0, 3.0, 4.0])}
    result = aggregate_subsets(system, gold)
    assert result["mean"] == pytest.approx((100 + 40) / 2)
    assert result["wmean"] == pytest.approx((3 * 100 + 4 * 40) / 7)
    assert result["all"] == pytest.approx(100 * 14.5 / 26.5)


def test_sts_task_scores_through_cosines(tmp_path: Path) -> None:
    # embeddings on the unit circle: cos(angle) is the system score, so the hand values above hold
    (tmp_path / "STS.input.A.txt").write_text("a0\ta1\nb0\tb1\nc0\tc1\n")
    (tmp_path / "STS.gs.A.txt").write_text("1\n2\n3\n")
    (tmp_path / "STS.input.B.txt").write_text("d0\td1\ne0\te1\nf0\tf1\ng0\tg1\n")
    (tmp_path / "STS.gs.B.txt").write_text("1\n2\n3\n4\n")
    cosines = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.3, "e": 0.1, "f": 0.2, "g": 0.4}
    table = {}
    for name, cos in cosines.items():
        table[f"{name}0"] = np.array([1.0, 0.0])
        table[f"{name}1"] = 3.0 * np.array([cos, math.sqrt(1 - cos**2)])  # the norm must not matter
    parts = {"A": read_sts_subset(tmp_path, "A"), "B": read_sts_subset(tmp_path, "B")}
    encoder = TableEncoder(table)
    scores = score_task("sts12", parts, lambda texts: encoder.encode(texts), ScoreOptions())
    assert scores["sts12"] == pytest.approx(100 * 14.5 / 26.5)
    assert scores["sts12_mean"] == pytest.approx(70.0)
    assert scores["sts12_wmean"] == pytest.approx(460 / 7)
    assert scores["sts12_A"] == pytest.approx(100.0) and scores["sts12_B"] == pytest.approx(40.0)


# ------------------------------------------------------------------------------------------------
# evaluate / evaluate_dev on the fixture
# ------------------------------------------------------------------------------------------------
def test_evaluate_encodes_every_sentence_once_and_reports_all_keys(sts_root: Path, tmp_path: Path) -> None:
    encoder = HashEncoder()
    results = evaluate(encoder, sts_root, tasks=["sts"], out_dir=tmp_path)
    assert len(encoder.calls) == 1
    assert len(encoder.calls[0]) == len(set(encoder.calls[0]))
    for task in ("sts12", "sts13", "sts14", "sts15", "sts16"):
        assert {task, f"{task}_mean", f"{task}_wmean"} <= results.keys()
    assert {
        "sts12_MSRpar",
        "sts12_surprise_OnWN",
        "sts14_deft_forum",
        "sts16_question_question",
    } <= results.keys()
    assert "sts13_SMT" not in results
    assert {
        "stsb",
        "stsb_dev",
        "sickr",
        "sickr_dev",
        "align",
        "uniform",
        "anisotropy_mean_cos",
    } <= results.keys()
    seven = [results[t] for t in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")]
    assert results["sts_avg"] == pytest.approx(np.mean(seven))
    assert all(-100 <= v <= 100 for v in seven)
    assert (tmp_path / "anisotropy.png").stat().st_size > 1000


def test_evaluate_single_task_has_no_average_and_skips_geometry(sts_root: Path) -> None:
    results = evaluate(HashEncoder(), sts_root, tasks=["sts13"],
                       options=EvalOptions(align_uniform=False, anisotropy=False))
    assert set(results) == {
        "sts13",
        "sts13_mean",
        "sts13_wmean",
        "sts13_FNWN",
        "sts13_headlines",
        "sts13_OnWN",
    }


def test_evaluate_with_tiny_bert_and_dev_selection(sts_root: Path, tiny_bert: Path) -> None:
    from cl_bench.models.encoder import build_encoder

    torch.set_num_threads(1)
    encoder = build_encoder(str(tiny_bert), pooler="avg", fresh_mlp=False)
    results = evaluate(encoder, sts_root, tasks=["stsb", "sickr"], options=EvalOptions(batch_size=16))
    assert all(np.isfinite(results[k]) for k in ("stsb", "sickr", "align", "uniform"))
    assert 0.0 <= results["align"] <= 4.0 and results["uniform"] <= 0.0
    for metric in ("stsb_dev", "sts_dev_avg"):
        dev = evaluate_dev(encoder, sts_root, select_metric=metric, batch_size=16)
        assert metric in dev and np.isfinite(dev[metric])
    assert dev["sts_dev_avg"] == pytest.approx((dev["stsb_dev"] + dev["sickr_dev"]) / 2)
    assert {"align_dev", "uniform_dev", "anisotropy_mean_cos_dev", "anisotropy_sv_top1_dev"} <= dev.keys()
    assert dev["stsb_dev"] == pytest.approx(results["stsb_dev"], abs=1e-4)


def test_evaluate_dev_caches_parsed_data(tmp_path: Path) -> None:
    root = write_sts_fixture(tmp_path / "data", seed=3)
    first = evaluate_dev(HashEncoder(), root, "sts_dev_avg")
    for path in (root / "sts").rglob("*"):
        if path.is_file():
            path.unlink()  # a second call must not need the files any more
    assert evaluate_dev(HashEncoder(), root, "sts_dev_avg") == first


def test_whitening_changes_sts_scores(sts_root: Path) -> None:
    raw = evaluate(HashEncoder(), sts_root, tasks=["stsb"],
                   options=EvalOptions(align_uniform=False, anisotropy=False))
    white = evaluate(HashEncoder(), sts_root, tasks=["stsb"],
                     options=EvalOptions(postprocess="whitening", whitening=8, align_uniform=False, anisotropy=False))
    assert raw["stsb"] != white["stsb"]
    with pytest.raises(ValueError, match="eval.whitening: k=32"):
        evaluate(HashEncoder(width=16), sts_root, tasks=["stsb"],
                 options=EvalOptions(postprocess="whitening", whitening=32))


# ------------------------------------------------------------------------------------------------
# Geometry
# ------------------------------------------------------------------------------------------------
def test_alignment_and_uniformity_match_wang_isola_reference() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(300, 12)), rng.normal(size=(300, 12))
    tx = torch.nn.functional.normalize(torch.tensor(x), dim=1)
    ty = torch.nn.functional.normalize(torch.tensor(y), dim=1)
    # the reference code of Wang & Isola (2020): align_loss and uniform_loss
    reference_align = (tx - ty).norm(p=2, dim=1).pow(2).mean().item()
    reference_uniform = torch.pdist(tx, p=2).pow(2).mul(-2).exp().mean().log().item()
    assert alignment(x, y) == pytest.approx(reference_align, rel=1e-9)
    assert uniformity(x, block_rows=64) == pytest.approx(reference_uniform, rel=1e-9)


def test_anisotropy_metrics() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 10))
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    brute = (unit @ unit.T)[~np.eye(200, dtype=bool)].mean()
    assert mean_pairwise_cosine(x) == pytest.approx(brute, rel=1e-9)
    isotropic, spectrum = anisotropy_metrics(x)
    skewed, _ = anisotropy_metrics(x + 5.0)  # a shared offset: the anisotropic "narrow cone"
    assert spectrum.shape == (10,) and np.all(np.diff(spectrum) <= 1e-12)
    assert skewed["anisotropy_mean_cos"] > 0.8 > abs(isotropic["anisotropy_mean_cos"])
    assert skewed["anisotropy_sv_top1"] > isotropic["anisotropy_sv_top1"]
    assert skewed["anisotropy_effective_rank"] < isotropic["anisotropy_effective_rank"]


def test_whitening_transform_is_bert_whitening() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(500, 6)) @ rng.normal(size=(6, 6)) + 3.0
    full = Whitening.fit(x, 6)
    y = full.transform(x)
    np.testing.assert_allclose(y.mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(np.cov(y.T), np.eye(6), atol=1e-9)
    kept = Whitening.fit(x, 2).transform(x)
    # keeping k dims = the k directions of largest variance of the original data
    np.testing.assert_allclose(kept, y[:, :2], atol=1e-9)
    with pytest.raises(ValueError, match="eval.whitening"):
        Whitening.fit(x, 7)


# ------------------------------------------------------------------------------------------------
# Validation and table
# ------------------------------------------------------------------------------------------------
def test_resolve_tasks_and_unknown_names() -> None:
    assert resolve_tasks(["stsb", "sts12"]) == ["sts12", "stsb"]
    assert resolve_tasks("transfer") == ["mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc"]
    assert len(resolve_tasks(["sts", "transfer", "sts12"])) == 14
    with pytest.raises(
        EvalConfigError, match=r"eval.tasks: unknown task 'sts17'; valid: sts, transfer, sts12"
    ):
        resolve_tasks(["sts17"])


def test_check_eval_config_before_model_load(sts_root: Path, tmp_path: Path) -> None:
    assert check_eval_config(sts_root, ["sts"], select_metric="sts_dev_avg") == [
        "sts12",
        "sts13",
        "sts14",
        "sts15",
        "sts16",
        "stsb",
        "sickr",
    ]
    with pytest.raises(EvalConfigError, match=r"transfer/MR/rt-polarity\.pos: missing data file"):
        check_eval_config(sts_root, ["mr"])
    with pytest.raises(EvalConfigError, match="missing data root"):
        check_eval_config(tmp_path / "absent", ["sts"])
    with pytest.raises(EvalConfigError, match="eval.transfer_config: must be one of full, fast, got 'slow'"):
        check_eval_config(sts_root, ["sts"], options=EvalOptions(transfer_config="slow"))
    with pytest.raises(EvalConfigError, match="eval.whitening"):
        check_eval_config(sts_root, ["sts"], options=EvalOptions(whitening=0))
    with pytest.raises(EvalConfigError, match="train.select_metric: unknown 'stsb'"):
        check_eval_config(sts_root, ["sts"], select_metric="stsb")
    with pytest.raises(EvalConfigError, match="eval.tsks: unknown key"):
        EvalOptions.from_config({"tsks": ["sts"]})
    partial = write_sts_fixture(tmp_path / "partial")
    (partial / "sts/STSBenchmark/sts-train.csv").unlink()
    check_eval_config(partial, ["stsb"], options=EvalOptions(align_uniform_split="test"))  # train split not needed
    with pytest.raises(EvalConfigError, match=r"sts-train\.csv: missing data file"):
        check_eval_config(partial, ["stsb"])  # default geometry split "all" needs it
    with pytest.raises(EvalConfigError, match=r"sts-train\.csv: missing data file"):
        check_eval_config(partial, ["stsb"],
                          options=EvalOptions(align_uniform_split="test", postprocess="whitening"))  # all splits


def test_format_table_rows() -> None:
    results = {"sts12": 72.368, "stsb": 82.032, "sts_avg": 77.0, "mr": 80.0}
    table = format_table(results)
    lines = table.splitlines()
    assert "STS12" in lines[1] and "SICK-R" in lines[1] and "Avg." in lines[1]
    assert "72.37" in lines[3] and "82.03" in lines[3] and "77.00" in lines[3] and " - " in lines[3]
    assert "MRPC" in table and "80.00" in table
    assert "MR" not in format_table({"sts12": 1.0})


def test_geometry_without_positives_is_nan_and_bad_encoder_output_is_an_error(sts_root: Path) -> None:
    from cl_bench.data.senteval import ScoredPairs
    from cl_bench.eval.embed import EmbeddingTable
    from cl_bench.eval.suite import geometry_metrics

    pairs = ScoredPairs(("a b", "c d"), ("e f", "g h"), np.array([1.0, 3.0]))
    table = EmbeddingTable(HashEncoder(), [*pairs.sent1, *pairs.sent2], batch_size=8)
    metrics = geometry_metrics(pairs, table, anisotropy=False)
    assert math.isnan(metrics["align"]) and np.isfinite(metrics["uniform"])

    class Broken:
        def encode(self, sentences: Sequence[str], batch_size: int = 128) -> np.ndarray:
            return np.zeros((len(sentences) + 1, 4), dtype=np.float32)

    with pytest.raises(ValueError, match=r"encoder.encode returned shape \(3, 4\) for 2 sentences"):
        EmbeddingTable(Broken(), ["x", "y"], batch_size=8)
