"""results.json's provenance traces a run to its inputs: data hashes, model weights, packages, cl-bench's commit,
and the evaluation settings that change the figures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import cli_env

import cl_bench
from cl_bench.commands.provenance import FileHashes, data_digest, data_hashes, eval_settings, model_revision
from cl_bench.config import typed_specs
from cl_bench.tracking.environment import git_commit


def _compose(overrides: list[str]):  # noqa: ANN202 (a DictConfig)
    from hydra import compose, initialize_config_dir

    from cl_bench.config import register_schemas
    from cl_bench.config.catalog import CONF_DIR

    register_schemas()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def test_a_file_hash_is_cached_and_a_one_byte_edit_changes_it(tmp_path: Path) -> None:
    data = tmp_path / "corpus.txt"
    data.write_text("a sentence\n" * 1000)
    cache = tmp_path / "cache" / "file_sha256.json"
    hashes = FileHashes(cache)
    first = hashes.sha256(data)
    hashes.save()
    again = FileHashes(cache)
    assert again.sha256(data) == first and not again.changed  # the second time: from the cache, no re-hash
    original = data.stat()
    data.write_bytes(b"A" + data.read_bytes()[1:])  # one byte, same size
    os.utime(data, ns=(original.st_atime_ns, original.st_mtime_ns + 1_000_000_000))  # the cache keys on size and mtime
    edited = FileHashes(cache)
    assert edited.sha256(data) != first and edited.changed
    import hashlib

    assert edited.sha256(data) == hashlib.sha256(data.read_bytes()).hexdigest()


def test_the_data_files_of_a_run_are_hashed_and_stable_across_runs(data_dir: Path, tmp_path: Path) -> None:
    cfg = _compose(["mode=eval", "eval.tasks=[stsb]", "eval.align_uniform=false", "eval.anisotropy=false",
                    f"paths.data_dir={data_dir}"])
    cache = tmp_path / "hashes.json"
    first = data_hashes(typed_specs(cfg), FileHashes(cache))
    assert first and all(len(sha) == 64 for sha in first.values())
    assert any("sts" in name.lower() for name in first)
    second = FileHashes(cache)
    assert data_hashes(typed_specs(cfg), second) == first and not second.changed
    assert data_digest(first) == data_digest(dict(first)) and data_digest(first).endswith(f"({len(first)} files)")


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_the_commit_is_cl_benchs_own_and_an_untracked_file_makes_it_dirty(tmp_path: Path) -> None:
    repo = tmp_path / "clone"
    package = repo / "cl_bench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    _git("init", "-q", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-qm", "x", cwd=repo)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert git_commit(package) == sha
    (package / "new_module.py").write_text("x = 1\n")  # untracked, inside the package
    assert git_commit(package) == f"{sha}-dirty"


def test_an_install_inside_another_repository_is_not_that_repositorys_commit(tmp_path: Path) -> None:
    project = tmp_path / "someone_elses_project"
    package = project / "venv" / "site-packages" / "cl_bench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    _git("init", "-q", cwd=project)
    _git("add", "-A", cwd=project)
    _git("commit", "-qm", "x", cwd=project)
    assert git_commit(package) == f"installed package, version {cl_bench.__version__}"
    outside = tmp_path / "plain" / "cl_bench"
    outside.mkdir(parents=True)
    assert git_commit(outside) == f"installed package, version {cl_bench.__version__}"


def test_a_local_model_is_identified_by_its_weights(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 64)
    (tmp_path / "config.json").write_text("{}")
    cache = tmp_path / "h.json"
    first = model_revision(str(tmp_path), FileHashes(cache))
    assert first.startswith("weights sha256:") and "model.safetensors" in first
    (tmp_path / "model.safetensors").write_bytes(b"\x01" * 65)
    assert model_revision(str(tmp_path), FileHashes(cache)) != first
    assert model_revision("no-such-org/no-such-model").startswith("hub no-such-org/no-such-model")


def test_the_evaluation_settings_that_change_figures_are_named() -> None:
    cfg = _compose(["eval.truncate_dim=128", "eval.postprocess=whitening", "eval.whitening=64"])
    assert eval_settings(cfg) == {"eval_truncate_dim": "128", "eval_postprocess": "whitening (k=64)",
                                  "eval_precision": "auto", "eval_backend": "auto",
                                  "eval_pooling": "cls (the run's pooler)"}
    assert eval_settings(_compose(["pooler=cls_before_pooler", "eval.pooler=cls_avg"]))["eval_pooling"] == (
        "cls_avg (eval.pooler; trained with cls_before_pooler)")
    assert eval_settings(cfg, "cpu")["eval_precision"] == "auto (fp32)"  # what auto computes in on this device
    assert eval_settings(_compose(["eval.precision=fp32"]), "cpu")["eval_precision"] == "fp32"
    assert eval_settings(_compose([]))["eval_truncate_dim"] == "all (no truncation)"


@pytest.mark.slow  # one mode=eval run of the tiny model (~30 s on a busy 2-core machine)
def test_a_truncated_evaluation_says_so_and_records_its_provenance(tiny_bert: Path, data_dir: Path,
                                                                   tmp_path: Path) -> None:
    proc = subprocess.run(
        [shutil.which("cl-bench") or "cl-bench", "mode=eval", f"model.name_or_path={tiny_bert}", "eval.tasks=[stsb]",
         "eval.truncate_dim=16", "eval.backend=torch", "eval.align_uniform=false", "eval.anisotropy=false", "logger=none",
         "hydra.run.dir=run"],
        cwd=tmp_path, capture_output=True, text=True, env=cli_env(data_dir, CL_BENCH_CACHE=str(tmp_path / "cache")),
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "evaluated with: embedding dimensions 16, post-processing none, precision auto (fp32)" in proc.stdout
    provenance = json.loads((tmp_path / "run" / "results.json").read_text())["provenance"]
    assert provenance["eval_truncate_dim"] == "16" and provenance["eval_postprocess"] == "none"
    assert provenance["model_revision"].startswith("weights sha256:")
    assert provenance["data_digest"].startswith("sha256:") and provenance["data_sha256"]
    assert provenance["packages"]["torch"] and "sentence-transformers" in provenance["packages"]
    assert provenance["cl_bench_commit"]
    assert (tmp_path / "cache" / "file_sha256.json").is_file()


@pytest.mark.slow  # two mode=eval runs of the tiny model (~1 min on a busy 2-core machine)
def test_eval_pooler_repools_the_final_evaluation_and_says_so(tiny_bert: Path, data_dir: Path, tmp_path: Path) -> None:
    """``eval.pooler=cls_avg`` (AnglE's evaluation pooling) scores another embedding than the run's pooler, and the
    table's settings line and results.json's provenance name it."""
    def run(name: str, *extra: str) -> tuple[str, dict]:
        proc = subprocess.run(
            [shutil.which("cl-bench") or "cl-bench", "mode=eval", f"model.name_or_path={tiny_bert}", "eval.tasks=[stsb]",
             "pooler=cls_before_pooler", "eval.backend=torch", "eval.align_uniform=false", "eval.anisotropy=false",
             "logger=none", f"hydra.run.dir={name}", *extra],
            cwd=tmp_path, capture_output=True, text=True, env=cli_env(data_dir, CL_BENCH_CACHE=str(tmp_path / "cache")),
            timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout, json.loads((tmp_path / name / "results.json").read_text())

    plain_out, plain = run("plain")
    avg_out, repooled = run("repooled", "eval.pooler=cls_avg")
    assert "pooling cls_before_pooler (the run's pooler)" in plain_out
    assert "pooling cls_avg (eval.pooler; trained with cls_before_pooler)" in avg_out
    assert repooled["provenance"]["eval_pooler"] == "cls_avg"
    assert plain["provenance"]["eval_pooler"] == "cls_before_pooler"
    assert repooled["sts/stsb"] != plain["sts/stsb"]  # the STS-B test figure
