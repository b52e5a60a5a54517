"""The evaluation-task registry: one entry gives a task its required files, scores, averages and table
column; a task can be registered at runtime or from a user's folder (``eval_task/<name>.yaml``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import HashEncoder, cli_env, write_sts_fixture

from cl_bench.data.download import load_manifest
from cl_bench.eval import (
    EvalConfigError,
    EvalOptions,
    check_eval_config,
    evaluate,
    evaluate_dev,
    format_table,
    resolve_tasks,
)
from cl_bench.eval.geometry import cosine_rows
from cl_bench.eval.registry import (
    BUILTIN,
    TASKS,
    EvalTask,
    average_members,
    groups,
    register_folder,
    table_rows,
    task_from_yaml,
)
from cl_bench.eval.sts import spearman100
from cl_bench.eval.tasks import dev_required_files, required_files

TOY_PAIRS = [
    ("a man plays a guitar", "a man plays music", 4.6),
    ("the dog runs fast", "a cat sleeps", 0.4),
    ("two kids read books", "children are reading", 3.9),
    ("a woman cooks food", "food is cooked by a woman", 4.8),
    ("the sky is blue", "the car is red", 1.0),
    ("people walk in the park", "people stroll through a park", 4.2),
]


def write_toy(root: Path, folder: str = "toy") -> tuple[str, str]:
    """An STS12–16-format sub-dataset (tab-separated pairs, gold scores) under ``root/folder``."""
    (root / folder).mkdir(parents=True, exist_ok=True)
    pairs, gold = f"{folder}/STS.input.toy.txt", f"{folder}/STS.gs.toy.txt"
    (root / pairs).write_text("".join(f"{a}\t{b}\n" for a, b, _ in TOY_PAIRS))
    (root / gold).write_text("".join(f"{g}\n" for *_, g in TOY_PAIRS))
    return pairs, gold


def toy_spearman() -> float:
    """The toy task's figure computed by hand: Spearman x 100 of the cosines of HashEncoder's embeddings."""
    encoder = HashEncoder()
    first = encoder.encode([a for a, _, _ in TOY_PAIRS])
    second = encoder.encode([b for _, b, _ in TOY_PAIRS])
    return spearman100(cosine_rows(first, second), np.array([g for *_, g in TOY_PAIRS]))


def test_the_builtin_registry_gives_simcse_tables_and_averages() -> None:
    assert groups() == {
        "sts": ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"),
        "transfer": ("mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc"),
    }
    headers = [[header for header, _ in row] for row in table_rows()]
    assert headers == [["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "Avg."],
                       ["MR", "CR", "SUBJ", "MPQA", "SST-2", "TREC", "MRPC", "Avg."]]
    averages = average_members()
    assert averages["sts_avg"] == list(groups()["sts"]) and averages["sts_dev_avg"] == ["stsb_dev", "sickr_dev"]
    assert averages["transfer_dev_avg"] == [f"{t}_dev" for t in groups()["transfer"]]
    assert TASKS["mrpc"].metrics == ("mrpc", "mrpc_dev", "mrpc_f1") and TASKS["sts13"].parts.keys() == {
        "FNWN", "headlines", "OnWN"}  # SentEval leaves out SMT


def test_every_file_an_evaluation_reads_is_one_the_data_tool_fetches_and_verifies() -> None:
    manifest = load_manifest()
    yielded = {rel for source in manifest["sources"] for rel in source["yields"]}
    every = required_files(list(TASKS), align_uniform=True, anisotropy=True, fit_per_task=True)
    every += dev_required_files("transfer_dev_avg")
    assert len(every) > 60 and not [rel for rel in every if rel not in yielded]
    assert not [rel for rel in every if manifest["files"].get(rel, {}).get("optional")]


def test_a_task_registered_at_runtime_is_checked_scored_averaged_and_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_sts_fixture(tmp_path / "data")
    pairs, gold = write_toy(root)
    toy = EvalTask(
        name="toy", header="TOY", group="sts", kind="sts", parts={"toy": (pairs, gold)},
        reader="cl_bench.data.senteval.read_sts_pair_files", scorer="cl_bench.eval.sts.score_sts_subsets",
        metrics=("toy", "toy_mean", "toy_wmean"), averages={"sts_avg": "toy"},
    )
    monkeypatch.setitem(TASKS, "toy", toy)

    assert resolve_tasks("sts")[-1] == "toy" and required_files(["toy"]) == [pairs, gold]
    (root / gold).rename(root / "gold.bak")
    with pytest.raises(EvalConfigError, match=r"toy/STS\.gs\.toy\.txt: missing data file of evaluation task 'toy'"):
        check_eval_config(root, ["sts"])
    (root / "gold.bak").rename(root / gold)

    results = evaluate(HashEncoder(), root, tasks=["sts"],
                       options=EvalOptions(align_uniform=False, anisotropy=False))
    assert results["toy"] == pytest.approx(toy_spearman()) and results["toy_toy"] == results["toy"]
    eight = [results[t] for t in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "toy")]
    assert results["sts_avg"] == pytest.approx(np.mean(eight))
    header, row = format_table(results).splitlines()[1], format_table(results).splitlines()[3]
    assert header.split("|")[-3].strip() == "TOY" and f"{results['toy']:.2f}" in row.split("|")[-3]
    assert f"{results['sts_avg']:.2f}" in row.split("|")[-2]

    # a task of its own group: its own row and average, the built-in averages untouched
    monkeypatch.setitem(TASKS, "toy", EvalTask(**{**toy.__dict__, "group": "mine", "averages": {"mine_avg": "toy"}}))
    alone = evaluate(HashEncoder(), root, tasks=["mine", "stsb"],
                     options=EvalOptions(align_uniform=False, anisotropy=False))
    assert alone["mine_avg"] == pytest.approx(alone["toy"]) and "sts_avg" not in alone
    assert format_table(alone).splitlines()[-4].split() == ["|", "TOY", "|", "Avg.", "|"]


def test_a_task_in_a_dev_average_is_scored_during_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_sts_fixture(tmp_path / "data")
    pairs, gold = write_toy(root)
    monkeypatch.setitem(TASKS, "toy", EvalTask(
        name="toy", header="TOY", group="sts", kind="sts", parts={"dev": (pairs, gold)},
        reader="cl_bench.data.senteval.read_sts_pair_files", scorer="cl_bench.eval.sts.score_sts_splits",
        metrics=("toy_dev",), averages={"sts_dev_avg": "toy_dev"}, scored_parts=("dev",),
    ))
    assert dev_required_files("sts_dev_avg")[-2:] == [pairs, gold]
    dev = evaluate_dev(HashEncoder(), root, "sts_dev_avg", align_uniform=False, anisotropy=False)
    assert dev["toy_dev"] == pytest.approx(toy_spearman())
    assert dev["sts_dev_avg"] == pytest.approx(np.mean([dev["stsb_dev"], dev["sickr_dev"], dev["toy_dev"]]))


def test_bad_entries_are_rejected_naming_the_task_or_file(tmp_path: Path) -> None:
    reader, scorer = "cl_bench.data.senteval.read_sts_pair_files", "cl_bench.eval.sts.score_sts_subsets"
    with pytest.raises(ValueError, match="evaluation task 'sts': the name must be lower case and not a group name"):
        EvalTask("sts", "X", "x", "sts", {"a": ("f",)}, reader, scorer, ("sts",))
    with pytest.raises(ValueError, match="evaluation task 'toy': its group 'stsb' is a task name"):
        EvalTask("toy", "X", "stsb", "sts", {"a": ("f",)}, reader, scorer, ("toy",))
    with pytest.raises(ValueError, match="kind 'regression' is not one of sts, transfer"):
        EvalTask("toy", "X", "x", "regression", {"a": ("f",)}, reader, scorer, ("toy",))
    with pytest.raises(ValueError, match="averages take toy_dev, which is not one of its metrics"):
        EvalTask("toy", "X", "x", "sts", {"a": ("f",)}, reader, scorer, ("toy",), {"sts_avg": "toy_dev"})
    (tmp_path / "eval_task").mkdir()
    bad = tmp_path / "eval_task" / "toy.yaml"
    bad.write_text("group: mine\nkind: sts\nparts: {test: [a, b]}\nreader: x.y\nscorer: x.z\nfiles: [a]\n")
    with pytest.raises(ValueError, match=r"toy\.yaml: unknown key 'files'"):
        task_from_yaml(bad)
    bad.write_text("name: stsb\ngroup: mine\nkind: sts\nparts: {test: [a, b]}\nreader: x.y\nscorer: x.z\n")
    with pytest.raises(ValueError, match="'stsb' is a built-in evaluation task"):
        register_folder(tmp_path)
    assert TASKS["stsb"] is BUILTIN["stsb"]


TOY_YAML = """\
# A toy STS-format task of the user's own.
header: TOY
group: mine
kind: sts
parts:
  toy: [toy/STS.input.toy.txt, toy/STS.gs.toy.txt]
reader: cl_bench.data.senteval.read_sts_pair_files
scorer: cl_bench.eval.sts.score_sts_subsets
metrics: [toy, toy_mean, toy_wmean]
averages: {mine_avg: toy}
"""


@pytest.mark.slow  # ~60 s on 2 quiet cores: a real cl-bench run; the in-process registry tests stay default
def test_a_user_task_from_their_own_folder_through_the_real_command(tiny_bert: Path, tmp_path: Path) -> None:
    folder = tmp_path / "my_tasks"
    (folder / "eval_task").mkdir(parents=True)
    (folder / "eval_task" / "toy.yaml").write_text(TOY_YAML)
    root = tmp_path / "data"
    write_toy(root)
    search = f"hydra.searchpath=[file://{folder}]"

    def cl_bench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from cl_bench.commands.cli import main; main()", *args], cwd=tmp_path,
                              env=cli_env(root), capture_output=True, text=True, timeout=600)

    listing = cl_bench("list", search)
    assert "  toy: TOY (group mine, kind sts), 2 files; metrics: toy, toy_mean, toy_wmean; averages: mine_avg" in listing.stdout
    run = cl_bench(search, "mode=eval", f"model.name_or_path={tiny_bert}", "eval.tasks=[mine]", "eval.align_uniform=false",
                   "eval.anisotropy=false", "logger=none", "hydra.run.dir=run")
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["mine/mine_avg"] == results["mine/toy"] and -100 <= results["mine/toy"] <= 100  # its group: the section
    assert "TOY" in run.stdout and "Avg." in run.stdout
    (root / "toy" / "STS.gs.toy.txt").unlink()
    missing = cl_bench(search, "mode=eval", f"model.name_or_path={tiny_bert}", "eval.tasks=[toy]", "logger=none",
                       "eval.align_uniform=false", "eval.anisotropy=false")
    assert missing.returncode == 2 and "toy/STS.gs.toy.txt" in missing.stderr.strip().splitlines()[-1]
    (folder / "eval_task" / "toy.yaml").write_text(TOY_YAML.replace("kind: sts", "kind: ranking"))
    bad = cl_bench(search, "mode=eval", f"model.name_or_path={tiny_bert}")
    last = bad.stderr.strip().splitlines()[-1]
    assert bad.returncode == 2 and last.startswith(f"cl-bench: error: {folder}") and "kind 'ranking'" in last
