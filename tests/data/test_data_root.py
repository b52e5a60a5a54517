"""The data root from a relative CL_BENCH_DATA (the README's ``export CL_BENCH_DATA=../shared/data``): made
absolute once, by cl-bench's helper and the suite's, so links and subprocesses started elsewhere find it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import data_root

from cl_bench.utils.cache_dirs import data_dir_from_environment, default_data_dir


def _relative_to_cwd(real: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Work from a temporary folder and point CL_BENCH_DATA at ``real`` by a relative path from there."""
    monkeypatch.chdir(tmp_path)
    relative = os.path.relpath(real, tmp_path)
    assert not Path(relative).is_absolute()
    monkeypatch.setenv("CL_BENCH_DATA", relative)
    return relative


def test_suite_data_root_helper_accepts_a_relative_path(data_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    real = data_dir
    _relative_to_cwd(real, tmp_path, monkeypatch)
    root = data_root()
    assert root.is_absolute()
    assert root.resolve() == real.resolve()
    # what the tests that build a temporary data root do: the link must resolve from anywhere
    linked = tmp_path / "elsewhere" / "data"
    linked.mkdir(parents=True)
    (linked / "sts").symlink_to(root / "sts")
    monkeypatch.chdir(linked)
    assert (linked / "sts" / "STSBenchmark").is_dir()


def test_cl_bench_data_root_is_absolute(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    relative = _relative_to_cwd(data_dir, tmp_path, monkeypatch)
    assert default_data_dir() == Path(os.path.abspath(relative))
    assert default_data_dir().resolve() == data_dir.resolve()
    monkeypatch.setenv("CL_BENCH_DATA", "~/cl-bench-data")
    assert data_dir_from_environment() == Path.home() / "cl-bench-data"
    monkeypatch.setenv("CL_BENCH_DATA", "")
    assert data_dir_from_environment() is None


def test_session_environment_holds_the_absolute_data_root(data_dir: Path) -> None:
    """conftest made the variable absolute at import: subprocesses started from a temporary folder inherit it."""
    assert Path(os.environ["CL_BENCH_DATA"]).is_absolute()
    assert Path(os.environ["CL_BENCH_DATA"]).resolve() == data_dir.resolve()
