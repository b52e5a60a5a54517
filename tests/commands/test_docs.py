"""The documentation site: generated reference pages are current, the strict MkDocs build passes and fails on
a broken internal link, the README stays a short entry point."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cl_bench.commands import docs_gen

REPO = Path(__file__).resolve().parents[2]


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of the site whose mkdocs.yml is in ``root`` (no -q: it hides the warnings)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(site)], capture_output=True, text=True, env=env, timeout=300)


def test_generated_reference_pages_equal_what_the_registry_gives_now() -> None:
    generated = docs_gen.generate()
    assert docs_gen.stale(generated) == [], "run `python -m cl_bench.commands.docs_gen` and commit the pages"
    methods = {row["method"] for row in docs_gen.catalog.method_rows()}
    pages = {p.stem for p in (REPO / "docs/methods").glob("*.md")} - {"index", "recipes"}
    assert pages == methods  # one page per method, and no page of a method that is gone
    reference = (REPO / "docs/reference/losses.md").read_text()
    assert all(f"[`{name}`]" in reference for name in docs_gen.catalog.options("loss"))
    assert "| <code>train.<wbr>gradcache_chunk</code> | `int` | `0` |" in (REPO / "docs/reference/configuration.md").read_text()
    diffcse = (REPO / "docs/methods/diffcse.md").read_text()  # its official code and what differs, from recipes.md
    assert "## Official code and what differs" in diffcse and "| `diffcse_bert` (`method=diffcse`) | voidism/DiffCSE" in diffcse


def test_a_changed_registry_makes_the_check_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", fake_docs)
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    monkeypatch.setattr(docs_gen, "DOCS", fake_docs)
    monkeypatch.setattr(docs_gen, "MKDOCS_YML", tmp_path / "mkdocs.yml")
    monkeypatch.setattr(docs_gen, "REPO", tmp_path)
    page = fake_docs / "reference/poolers.md"
    page.write_text(page.read_text().replace("avg_top2", "avg_top3"))
    assert docs_gen.main(["--check"]) == 1
    assert docs_gen.main([]) == 0 and docs_gen.main(["--check"]) == 0  # regenerating repairs it


def test_strict_docs_build_passes() -> None:
    result = _build(REPO, REPO / ".pytest_site")
    shutil.rmtree(REPO / ".pytest_site", ignore_errors=True)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


@pytest.mark.parametrize("link", ["[a missing page](no-such-page.md)", "[a missing anchor](benchmarks.md#no-such-section)"])
def test_a_broken_internal_link_fails_the_build(tmp_path: Path, link: str) -> None:
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with open(tmp_path / "docs/getting-started.md", "a") as fh:
        fh.write(f"\n{link}\n")
    result = _build(tmp_path, tmp_path / "site")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out[-2000:]
    assert "Aborted with 1 warnings in strict mode" in out and "getting-started.md" in out


def test_pending_pages_of_other_branches_do_not_fail_the_build(tmp_path: Path) -> None:
    """docs/_pending/<branch>.md (text waiting to be folded into the pages) is excluded from the site, so a page
    there that is in no nav and links nowhere valid leaves the strict build green; the same page elsewhere fails it."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "docs/_pending").mkdir(exist_ok=True)
    (tmp_path / "docs/_pending/some-branch.md").write_text("## target: Scaling\n\n[not yet a page](no-such-page.md)\n")
    result = _build(tmp_path, tmp_path / "site")
    assert result.returncode == 0, (result.stdout + result.stderr)[-2000:]
    shutil.move(tmp_path / "docs/_pending/some-branch.md", tmp_path / "docs/some-branch.md")
    assert _build(tmp_path, tmp_path / "site2").returncode != 0  # outside _pending: not in nav, broken link


def test_readme_is_a_short_entry_point_whose_links_resolve() -> None:
    import re

    from markdown.extensions.toc import slugify

    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", readme), "dated measurements belong on docs/benchmarks.md"
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert 'python -m pytest -m "not slow"\n' in blocks  # CI (.ci/run) runs exactly this command
    ci = (REPO / ".ci/run").read_text().splitlines()
    assert 'python -m pytest -m "not slow"' in ci and 'pip install -e ".[dev,mteb]"' in ci  # README's commands
    assert any(b.startswith('pip install torch==') and "cl-bench method=simcse loss.tau=0.05" in b for b in blocks)
    links = re.findall(r"\]\(((?:docs/)[^)#\s]*)(?:#([^)\s]+))?\)", readme)
    assert len(links) >= 15
    for target, anchor in links:
        path = REPO / target
        assert path.is_file(), target
        if anchor:
            headings = re.findall(r"^#+ (.+?)(?: \{#([^}]+)\})?$", path.read_text(), re.M)
            assert anchor in {custom or slugify(text, "-") for text, custom in headings}, f"{target}#{anchor}"


def test_the_built_pages_render_as_meant(tmp_path: Path) -> None:
    """The built HTML: no literal backslash before a pipe (a table cell's code span shows ``\\|`` as typed), no
    table-shaped text in a ``<pre>`` wider than the page (wrapped, its columns are lost: it is a Markdown table),
    the configuration reference's keys break only at their dots (``<wbr>``) and the stylesheet keeps table code
    from breaking elsewhere."""
    import html
    import re

    result = _build(REPO, tmp_path / "site")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    escaped, wide = [], []
    for page in (tmp_path / "site").rglob("*.html"):
        text = page.read_text()
        if "\\|" in text:
            escaped.append(str(page.relative_to(tmp_path / "site")))
        for block in re.findall(r"<pre[^>]*>(.*?)</pre>", text, flags=re.S):
            lines = html.unescape(re.sub(r"<[^>]+>", "", block)).splitlines()
            table = [line for line in lines if line.lstrip().startswith(("|", "+-"))]
            wide += [f"{page.parent.name}: {line[:60]}…" for line in table if len(line) > PRE_TABLE_CHARS]
    assert escaped == [], f"literal \\| in {escaped}"
    assert wide == [], wide
    configuration = (tmp_path / "site" / "reference" / "configuration" / "index.html").read_text()
    assert "<code>model.<wbr>name_or_path</code>" in configuration and "<code>train.<wbr>gradcache_chunk</code>" in configuration
    assert "<code>train &#124; eval</code>" in configuration  # a choice's pipes, shown as | (no backslash)
    css = (REPO / "docs" / "stylesheets" / "extra.css").read_text()
    assert re.search(r"table:not\(\[class\]\) code \{\s*word-break: keep-all;\s*overflow-wrap: normal;", css)


#: the widest line of table-shaped text a <pre> may hold: about what the Material theme's content column shows
#: unwrapped in code at a 1400 px window
PRE_TABLE_CHARS = 110
