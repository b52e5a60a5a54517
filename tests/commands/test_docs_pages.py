"""The docs a new user reads first: methods listed by name, every method page opening with how to run it, one page
that compares two methods (linked from the README), and code blocks that wrap."""

from __future__ import annotations

from pathlib import Path

import yaml

from cl_bench.commands.docs_gen import REPO, method_title
from cl_bench.config import catalog


def test_methods_menu_lists_names_not_identifiers() -> None:
    nav = yaml.safe_load("nav:" + (REPO / "mkdocs.yml").read_text().split("\nnav:", 1)[1])["nav"]  # the nav alone
    methods = next(entry["Methods"] for entry in nav if isinstance(entry, dict) and "Methods" in entry)
    titles = {next(iter(e)) for e in methods if isinstance(e, dict)}
    assert {"SG-OPT", "IS-BERT", "Supervised SimCSE", "Unsupervised SimCSE", "DiffCSE"} <= titles
    assert not titles & {"sg_opt", "is_bert", "simcse_sup"}


def test_every_method_page_opens_with_how_to_run_it() -> None:
    for row in catalog.method_rows():
        name = row["method"]
        page = (REPO / "docs" / "methods" / f"{name}.md").read_text()
        assert page.splitlines()[2] == f"# {method_title(name)} (`method={name}`)"
        run_it = page.index("## Run it")
        assert f"cl-bench method={name} " in page[run_it:page.index("\n## ", run_it + 1)]
        # before what it is and where it comes from (the official code's line numbers)
        for later in ("## What it does", "## In cl-bench", "## Official code"):
            assert later not in page or page.index(later) > run_it, (name, later)
    diffcse = (REPO / "docs" / "methods" / "diffcse.md").read_text()
    assert diffcse.index("method.generator=null") < diffcse.index("voidism/DiffCSE")


def test_one_page_compares_two_methods() -> None:
    page = (REPO / "docs" / "compare.md").read_text()
    for needed in ("cl-bench -m method=simcse,diffcse seeds=3", "cl-bench-report --parent-run <ID> --compare",
                   "paired bootstrap", "Welch", "the Holm-adjusted p", "What one seed can and cannot say",
                   "method.generator=null", "hf download", "A decoder model offline"):
        assert needed in page, needed
    assert "(docs/compare.md)" in (REPO / "README.md").read_text()
    # the hub hint's pointer names a heading of the page
    from cl_bench.models.hub import OFFLINE_MODELS_DOC

    anchor = OFFLINE_MODELS_DOC.split("#")[1]
    assert any(line.startswith("#") and line.lstrip("# ").lower().replace(":", "").replace(" ", "-") == anchor
               for line in page.splitlines())
    getting_started = (REPO / "docs" / "getting-started.md").read_text()
    assert getting_started.index("(compare.md)") < getting_started.index("Run names fit the runs table")


def test_code_blocks_wrap() -> None:
    config = (REPO / "mkdocs.yml").read_text()
    assert "stylesheets/extra.css" in config
    assert "white-space: pre-wrap" in (REPO / "docs" / "stylesheets" / "extra.css").read_text()
    assert Path(REPO / "docs" / "stylesheets" / "extra.css").is_file()
