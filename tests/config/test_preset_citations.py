"""Presets cite only files a user of the repository can open: the repository's own, or an upstream
repository's file named with that repository (owner/name on the same or the previous comment line)."""

from __future__ import annotations

import re

from cl_bench.config.catalog import CONF_DIR

ROOT = CONF_DIR.parent
DOC = re.compile(r"(?<![\w./-])((?:\.\./)*[\w./-]*\w\.md)\b")
REPOSITORY = re.compile(r"\b[A-Za-z0-9][\w-]*/[\w.-]+")
#: notes outside the repository (a workspace's reference folder and its data notes): never cited. (A
#: preset may say where the offline data or model copy sits, ``../shared/data``: a location, not a source.)
OUTSIDE = re.compile(r"shared/reference|protocols\.md|SOURCES\.md")


def _citations() -> list[tuple[str, int, str, str]]:
    """(file, line number, cited .md path, the line and the one before) for every ``.md`` cited in conf/."""
    found = []
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            for match in DOC.finditer(line):
                context = (lines[number - 1] if number else "") + "\n" + line[: match.start()]
                found.append((str(path.relative_to(ROOT)), number + 1, match.group(1), context))
    return found


def test_presets_cite_no_file_outside_the_repository() -> None:
    outside = [f"{path}:{number}: {m.group(0)}" for path in sorted(CONF_DIR.rglob("*.yaml"))
               for number, line in enumerate(path.read_text().splitlines(), 1) for m in [OUTSIDE.search(line)] if m]
    assert not outside, outside


def test_every_cited_markdown_file_is_in_the_repository_or_named_with_its_upstream() -> None:
    citations = _citations()
    assert any(cited == "README.md" for _, _, cited, _ in citations)  # the check sees the repository's own
    missing = [f"{path}:{number}: {cited}" for path, number, cited, context in citations
               if not (ROOT / cited).is_file()
               and not [r for r in REPOSITORY.findall(context) if not cited.startswith(r)]]
    assert not missing, missing
