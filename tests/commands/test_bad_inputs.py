"""Every command's bad inputs (issue 46): one line on stderr naming the key, flag or file, exit status 2, nothing written
(the working directory and the named targets listed before and after each case), and, for the checks before torch,
neither torch, transformers nor MLflow imported before the answer.

Each command runs in-process in one fresh interpreter (as tests/config/test_fast_rejection.py's probe does), in a fresh
working directory; the cases that must answer before torch come first and the probe records which heavy modules were
imported after each case.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import cli_env

ROOT = Path(__file__).resolve().parents[2]

_PROBE = r"""
import contextlib, io, json, os, sys
from pathlib import Path

def listing(paths):
    found = []
    for root in paths:
        root = Path(root)
        if root.exists():
            found += [str(p) for p in [root, *root.rglob("*")]]
    return sorted(found)

def call(command, argv):
    if command == "cl-bench":
        from cl_bench.commands import cli
        sys.argv = ["cl-bench", *argv]
        return cli.main()
    if command == "cl-bench-report":
        from cl_bench.commands import report_cli
        return report_cli.main(argv)
    if command == "cl-bench-data":
        from cl_bench.data import download
        return download.main(argv)
    if command == "cl-bench-export":
        from cl_bench.commands import export
        return export.main(argv)
    if command == "cl-bench-sync":
        from cl_bench.tracking import sync
        return sync.main(argv)
    raise ValueError(command)

answers = []
for command, argv, watched in json.loads(sys.argv[1]):
    before = listing([os.getcwd(), *watched])
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = call(command, argv) or 0
        except SystemExit as exit_:
            code = exit_.code
    heavy = sorted(m for m in ("torch", "transformers", "mlflow", "this") if m in sys.modules)
    answers.append({"code": code, "stderr": err.getvalue(), "new": sorted(set(listing([os.getcwd(), *watched])) - set(before)),
                    "heavy": heavy})
print(json.dumps(answers))
"""


def _folders(tmp_path: Path, tiny_bert: Path) -> dict[str, Path]:
    """The bad files and folders of the cases, outside the working directory."""
    files = tmp_path / "inputs"
    files.mkdir()
    (files / "one.txt").write_text("only one sentence here\n")
    (files / "two.txt").write_text("a first sentence\na second sentence\n")
    (files / "empty.txt").write_text("\n\n")
    (files / "binary.txt").write_bytes(b"a line\n\x00\x01\x02\x03 binary\n")
    (files / "latin1.txt").write_bytes("café au lait\nsecond line\n".encode("latin-1"))
    folders = {name: files / name for name in ("garbage", "truncated", "evil")}
    for folder in folders.values():
        shutil.copytree(tiny_bert, folder)
    (folders["garbage"] / "model.safetensors").write_bytes(os.urandom(4000))
    weights = (tiny_bert / "model.safetensors").read_bytes()
    (folders["truncated"] / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    (folders["evil"] / "cl_bench_encoder.json").write_text(json.dumps({"encoder_class": "this.Foo", "pooler": "cls"}))
    (files / "not_empty").mkdir()
    (files / "not_empty" / "keep.txt").write_text("mine\n")
    (files / "empty_sweep").mkdir()
    return {"files": files, **folders}


def _cases(tmp_path: Path, tiny_bert: Path, cwd: Path) -> list[tuple[str, list[str], list[str], str, bool]]:
    """``(command, argv, watched folders, what stderr's one line starts with after 'PROG: error: ', before torch)``."""
    f = _folders(tmp_path, tiny_bert)
    files, model = f["files"], f"model.name_or_path={tiny_bert}"
    corpus = [model, "batch_size=8", "train.max_steps=2"]
    return [
        # cl-bench: Hydra's grammar, the corpus (before the model loads), model folders (before any run folder)
        ("cl-bench", ["loss.tau=[0.05"], [], "loss.tau=[0.05: not a valid override at column 15: no viable alternative",
         True),
        ("cl-bench", ["a==b"], [], "a==b: not a valid override at column 3: extraneous input '='", True),
        ("cl-bench", ["mode=eval", "model.name_or_path=outputs/runs/2026-13-01/12-00-00/best_model"], [],
         "model.name_or_path: no Hugging Face model at 'outputs/runs/2026-13-01/12-00-00/best_model' (folder outputs "
         "not found)", True),
        ("cl-bench", ["mode=eval", "model.name_or_path=a b c"], [],
         "model.name_or_path: 'a b c' is neither a local folder nor a Hugging Face hub id", True),
        ("cl-bench", [*corpus, f"data.train_file={files / 'one.txt'}"], [],
         f"data.train_file: {files / 'one.txt'}: 1 non-blank line; training needs at least 2 items", True),
        ("cl-bench", [*corpus, f"data.train_file={files / 'two.txt'}", "data.limit=1"], [],
         f"data.train_file: {files / 'two.txt'}: 1 non-blank line (data.limit=1)", True),
        ("cl-bench", [*corpus, f"data.train_file={files / 'two.txt'}", "data.limit=-1"], [],
         "data.limit: must be >= 1 (or null: the whole corpus), got -1", True),
        ("cl-bench", [*corpus, f"data.train_file={files / 'empty.txt'}"], [],
         f"data.train_file: {files / 'empty.txt'}: corpus is empty", True),
        ("cl-bench", [*corpus, f"data.train_file={files / 'binary.txt'}"], [],
         f"data.train_file: {files / 'binary.txt'}:2: a NUL byte", True),
        ("cl-bench", [*corpus, f"data.train_file={files / 'latin1.txt'}"], [],
         f"data.train_file: {files / 'latin1.txt'}:1: not valid UTF-8", True),
        ("cl-bench", ["mode=eval", f"model.name_or_path={f['garbage']}"], [],
         f"model.name_or_path: {f['garbage'] / 'model.safetensors'}: not a readable safetensors file", True),
        ("cl-bench", ["mode=eval", f"model.name_or_path={f['truncated']}"], [],
         f"model.name_or_path: {f['truncated'] / 'model.safetensors'}: not a readable safetensors file (tensor", True),
        ("cl-bench", ["mode=eval", f"model.name_or_path={f['evil']}"], [],
         f"model.name_or_path: {f['evil'] / 'cl_bench_encoder.json'}: encoder_class 'this.Foo' is not one of "
         "cl-bench's encoder classes", True),
        # cl-bench-report and cl-bench-data: their argument parsers, before pandas or a store is opened
        ("cl-bench-report", ["--experiment", "x", "--resamples", "-5"], [],
         "argument --resamples: must be an integer >= 1, got -5", True),
        ("cl-bench-report", ["--bogus"], [], "unrecognized arguments: --bogus", True),
        ("cl-bench-data", ["download", "--retries", "-3"], [], "argument --retries: must be an integer >= 0, got -3",
         True),
        ("cl-bench-data", ["download", "--timeout", "0"], [], "argument --timeout: must be a number > 0, got 0", True),
        ("cl-bench-data", ["download", "--data-dir", str(tmp_path / "NEW"), "--url", "nourl"], [str(tmp_path / "NEW")],
         "--url: expected NAME=URL, got 'nourl'", True),
        ("cl-bench-data", ["download", "--data-dir", str(tmp_path / "NEW"), "--only", "nosuchsource"],
         [str(tmp_path / "NEW")], "--only: unknown source 'nosuchsource'; valid: ", True),
        # a sweep: every job checked before the first starts (no model loaded, no sweep folder left)
        ("cl-bench", ["-m", *corpus, f"data.train_file={files / 'two.txt'},{files / 'empty.txt'}"], [],
         "job 1 (", False),
        # a rejecting report creates no store: neither the named one nor ./mlflow.db
        ("cl-bench-report", ["--experiment", "x", "--tracking-uri", f"sqlite:///{cwd / 'no' / 'dir' / 'x.db'}"], [],
         f"--tracking-uri: no MLflow store at {cwd / 'no' / 'dir' / 'x.db'}", False),
        ("cl-bench-report", ["--sweep-dir", str(files / "empty_sweep")], [], f"{files / 'empty_sweep'}", False),
        # cl-bench-export: exit status 2 like every rejection; nothing exported
        ("cl-bench-export", [str(tmp_path / "no_run"), str(cwd / "out")], [],
         f"{tmp_path / 'no_run'}: neither a run directory", False),
        ("cl-bench-export", [str(tiny_bert), str(files / "not_empty"), "--pooler", "avg"], [str(files / "not_empty")],
         f"{files / 'not_empty'}: exists and is not empty; pass --overwrite", False),
        ("cl-bench-export", [str(f["garbage"]), str(cwd / "out"), "--pooler", "avg"], [],
         f"{f['garbage'] / 'model.safetensors'}: not a readable safetensors file", False),
        # cl-bench-sync
        ("cl-bench-sync", [str(tmp_path / "no_run")], [], f"{tmp_path / 'no_run'}: no such run directory", False),
        ("cl-bench-sync", ["--bogus", "x"], [], "unrecognized arguments: --bogus", False),
    ]


def test_every_commands_bad_inputs_get_one_line_exit_2_and_write_nothing(tmp_path: Path, tiny_bert: Path,
                                                                         data_dir: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cases = _cases(tmp_path, tiny_bert, cwd)
    env = cli_env(data_dir, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([[c, a, w] for c, a, w, _, _ in cases])],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answers = json.loads(proc.stdout.strip().splitlines()[-1])
    wrong = []
    for (command, argv, _, expected, before_torch), answer in zip(cases, answers, strict=True):
        lines = answer["stderr"].strip().splitlines()
        # PROG: error: ..., or PROG SUBCOMMAND: error: ... (argparse names a subcommand's parser so)
        one_line = len(lines) == 1 and lines[0].startswith(command) and ": error: " in lines[0].split(expected)[0]
        heavy = answer["heavy"] if before_torch else [m for m in answer["heavy"] if m == "this"]
        if answer["code"] != 2 or not one_line or expected not in lines[0] or answer["new"] or heavy:
            wrong.append((command, argv, answer))
    assert wrong == []  # each: exit 2, one line naming it, nothing new on disk, no heavy import before the answer
    assert sorted(p.name for p in cwd.iterdir()) == []  # no outputs/, no mlflow.db


def test_a_run_rejected_in_its_job_leaves_no_empty_outputs_folders(tmp_path: Path) -> None:
    """What Hydra made for a job that its own checks rejected (``.hydra/`` and the log) goes, with the date folder,
    ``outputs/runs/`` and ``outputs/`` when nothing else is in them; another day's run keeps its folders."""
    from cl_bench.commands.job import discard_unused_run_dir

    def hydra_made(run_dir: Path) -> Path:
        (run_dir / ".hydra").mkdir(parents=True)
        (run_dir / ".hydra" / "config.yaml").write_text("{}\n")
        (run_dir / "cli.log").write_text("")
        return run_dir

    alone = tmp_path / "alone"
    discard_unused_run_dir(hydra_made(alone / "outputs" / "runs" / "2026-12-02" / "00-00-00-000000"))
    assert list(alone.iterdir()) == []
    shared = tmp_path / "shared"
    kept = shared / "outputs" / "runs" / "2026-12-01" / "09-00-00-000000"
    kept.mkdir(parents=True)
    (kept / "results.json").write_text("{}")
    discard_unused_run_dir(hydra_made(shared / "outputs" / "runs" / "2026-12-02" / "00-00-00-000000"))
    assert sorted(p.relative_to(shared).as_posix() for p in shared.rglob("*")) == [
        "outputs", "outputs/runs", "outputs/runs/2026-12-01", "outputs/runs/2026-12-01/09-00-00-000000",
        "outputs/runs/2026-12-01/09-00-00-000000/results.json"]
