"""A method shaped like a built-in one (a folder: torch-free ``configuration.py``, ``modeling.py``, an ``__init__.py``
that imports nothing, and its YAML) is found from its folder alone: listed, documented, checked before its
``modeling`` module (and torch) is imported, and trained, with no other file touched."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import cli_env

from cl_bench import specs
from cl_bench.config import catalog

CONFIGURATION = '''
"""The spec of method=toy_cse: torch-free."""
from dataclasses import dataclass
from typing import Annotated, ClassVar

from annotated_types import Ge

from cl_bench.specs import MethodSpec


@dataclass(kw_only=True)
class ToyCSESpec(MethodSpec):
    target: ClassVar[str] = "toy_cse.modeling.ToyCSE"
    uses: ClassVar[frozenset[str]] = frozenset({"loss", "pooler"})
    loss_kinds: ClassVar[tuple[str, ...]] = ("pair",)
    summary: ClassVar[str] = "toy_cse: each sentence against the next one"

    shift: Annotated[int, Ge(1)] = 1  # the neighbour each sentence is paired with (its rule declared here)
'''
MODELING = '''
"""Toy CSE: one view of each sentence against its neighbour in the batch (the docs' text of the method)."""
import sys

from cl_bench.methods.base import Method
from toy_cse.configuration import ToyCSESpec

print("toy_cse.modeling imported", file=sys.stderr)  # the checks must answer before this line runs


class ToyCSE(Method):
    """Reads self.spec.shift."""

    spec: ToyCSESpec

    def training_step(self, batch):
        z = self.encoder(self.tokenize(batch))
        return {"loss": self.loss_fn(z, z.roll(self.spec.shift, dims=0))}
'''
YAML = """\
# Toy CSE (a test's method folder): each sentence against the next one.
defaults:
  - override /loss@_group_: ntxent
  - _self_
_target_: toy_cse.modeling.ToyCSE
name: toy_cse
shift: 1
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A search-path folder holding the method folder ``toy_cse/`` and ``method/toy_cse.yaml``."""
    root = tmp_path / "ext"
    (root / "toy_cse").mkdir(parents=True)
    (root / "method").mkdir()
    (root / "toy_cse" / "__init__.py").write_text("")
    (root / "toy_cse" / "configuration.py").write_text(CONFIGURATION)
    (root / "toy_cse" / "modeling.py").write_text(MODELING)
    (root / "method" / "toy_cse.yaml").write_text(YAML)
    return root


@pytest.fixture
def in_process(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``folder`` importable in this process; afterwards its modules and the toy spec are gone again (the other tests
    see cl-bench's registry unchanged)."""
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(specs, "_REGISTRY", dict(specs._REGISTRY))
    monkeypatch.setattr(catalog, "_user_dirs", [folder])
    yield folder
    for name in [m for m in sys.modules if m == "toy_cse" or m.startswith("toy_cse.")]:
        del sys.modules[name]


def _cl_bench(args: list[str], cwd: Path, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from cl_bench.commands.cli import main; main()", *args],
                          cwd=cwd, env=cli_env(data_dir), capture_output=True, text=True, timeout=600, check=False)


def test_its_spec_is_found_beside_its_module_without_importing_it(in_process: Path) -> None:
    spec = specs.spec_for("toy_cse.modeling.ToyCSE", import_target=False)
    assert spec is not None and spec.__name__ == "ToyCSESpec" and "toy_cse.modeling" not in sys.modules


def test_it_is_documented_from_its_folder(in_process: Path) -> None:
    from cl_bench.commands import docs_gen

    pages = docs_gen.method_pages()
    page = pages["methods/toy_cse.md"]
    assert "# Toy CSE (`method=toy_cse`)" in page and "each sentence against the next one" in page
    assert "one view of each sentence against its neighbour in the batch" in page  # modeling.py's docstring
    # its keys table, from the spec's declaration: type, default, rule and the field's comment
    assert "| <code>method.<wbr>shift</code> | `int` | `1` | must be >= 1 | the neighbour each sentence is paired with" in page
    assert "[`toy_cse`](../methods/toy_cse.md)" in pages["reference/methods.md"]
    assert '"Toy CSE": methods/toy_cse.md' in docs_gen.nav_block([r["method"] for r in catalog.method_rows()])


def test_it_is_listed_checked_before_its_module_and_trained(
    folder: Path, tiny_bert: Path, data_dir: Path, tmp_path: Path
) -> None:
    search = f"hydra.searchpath=[file://{folder}]"
    listing = _cl_bench(["list", search], tmp_path, data_dir)
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert "toy_cse: toy_cse: each sentence against the next one" in listing.stdout
    assert "toy_cse.modeling imported" not in listing.stderr  # listing read the torch-free spec only
    for bad, line in ((["method.shift=0"], "method.shift: must be >= 1, got 0"),
                      (["+method.shfit=2"], "method.shfit: unknown key for toy_cse.modeling.ToyCSE; valid keys: shift")):
        proc = _cl_bench([search, "method=toy_cse", *bad, f"model.name_or_path={tiny_bert}", "data=wiki1m_head"],
                         tmp_path, data_dir)
        # one line: the spec answered before toy_cse.modeling (which prints a line when imported) was imported
        assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [f"cl-bench: error: {line}"], proc.stderr
    run = _cl_bench(
        [search, "method=toy_cse", f"model.name_or_path={tiny_bert}", "data=wiki1m_head", "data.limit=32",
         "batch_size=4", "train.max_steps=2", "train.eval_steps=0", "train.progress_bar=false", "eval.tasks=[stsb]",
         "eval.anisotropy=false", "eval.align_uniform=false", "logger=none", "hydra.run.dir=run"],
        tmp_path, data_dir,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "sts/stsb" in results  # the recorded name (tracking/metric_names.py)
    assert textwrap.dedent(YAML).splitlines()[4] in (tmp_path / "run" / ".hydra" / "config.yaml").read_text()
