"""Readers for multi-paragraph documents (DeCLUTR's span sampling needs contiguous text).

Two formats are read, chosen automatically from the file's first non-blank line:

* **WikiExtractor** output (``<doc id=".." url=".." title="..">``, the title line, a blank line,
  one paragraph per line, ``</doc>``), e.g. ``corpus/enwiki_wikiextractor_AA.txt.gz``.
  The title line WikiExtractor repeats as the first body line is dropped; HTML entities it leaves
  in the text (``&amp;``, ``&quot;``) are unescaped.
* **Plain text** with blank lines between documents (one or more lines per document).

A document's text is its paragraphs joined by single spaces with whitespace runs collapsed (the
same light sanitising DeCLUTR applies before splitting into whitespace tokens). Documents without
body text (WikiExtractor emits many: redirects, stubs) are left out. Sentence-level corpora for
QuickThoughts keep using :func:`cl_bench.data.text.read_sentences`, which preserves line order.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from cl_bench.data.text import DataFileError, iter_lines

log = logging.getLogger(__name__)

DocumentFormat = StrEnum("DocumentFormat", "auto wikiextractor plain")
_DOC_OPEN = re.compile(r"^<doc\b(?P<attrs>[^>]*)>\s*$")
_DOC_CLOSE = "</doc>"
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Document:
    """One document of a corpus.

    Attributes:
        doc_id: WikiExtractor's ``id`` attribute, or ``"<file line>"`` for plain text.
        title: WikiExtractor's ``title`` attribute ("" for plain text).
        text: the body, paragraphs joined by single spaces.
        line: the file line where the document starts (for error messages).
    """

    doc_id: str
    title: str
    text: str
    line: int

    @property
    def num_words(self) -> int:
        """Number of whitespace tokens (DeCLUTR's span unit)."""
        return len(self.text.split())


def _sanitize(paragraphs: list[str]) -> str:
    return _WHITESPACE.sub(" ", " ".join(paragraphs)).strip()


def detect_format(path: str | Path) -> str:
    """``wikiextractor`` when the first non-blank line opens a ``<doc ...>`` tag, else ``plain``."""
    for _, line in iter_lines(path):
        if line.strip():
            return "wikiextractor" if _DOC_OPEN.match(line.strip()) else "plain"
    raise DataFileError(f"{path}: corpus is empty (no non-blank line)")


def iter_wikiextractor_documents(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a WikiExtractor file (documents without body text are skipped).

    Raises:
        DataFileError: naming file and line for text outside ``<doc>`` tags, nested or unclosed tags.
    """
    open_line = 0
    attrs: dict[str, str] = {}
    body: list[str] | None = None
    for line_no, raw in iter_lines(path):
        line = raw.strip()
        opening = _DOC_OPEN.match(line)
        if opening:
            if body is not None:
                raise DataFileError(f"{path}:{line_no}: <doc> opened before the <doc> of line {open_line} was closed")
            attrs = {k: html.unescape(v) for k, v in _ATTRIBUTE.findall(opening.group("attrs"))}
            open_line, body = line_no, []
        elif line == _DOC_CLOSE:
            if body is None:
                raise DataFileError(f"{path}:{line_no}: </doc> without an open <doc>")
            title = attrs.get("title", "")
            paragraphs = [p for p in body if p]
            if paragraphs and paragraphs[0] == title.strip():  # WikiExtractor repeats the title
                paragraphs = paragraphs[1:]
            text = _sanitize(paragraphs)
            if text:
                yield Document(attrs.get("id", f"{Path(path).name}:{open_line}"), title, text, open_line)
            body = None
        elif body is not None:
            body.append(html.unescape(line))  # WikiExtractor leaves entities such as &amp; in the text
        elif line:
            raise DataFileError(f"{path}:{line_no}: text outside <doc> ... </doc> in a WikiExtractor file")
    if body is not None:
        raise DataFileError(f"{path}:{open_line}: <doc> is never closed (file ends inside it)")


def iter_plain_documents(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a plain-text file whose documents are separated by blank lines."""
    lines: list[str] = []
    start = 0
    for line_no, raw in iter_lines(path):
        line = raw.strip()
        if line:
            if not lines:
                start = line_no
            lines.append(line)
        elif lines:
            yield Document(f"{Path(path).name}:{start}", "", _sanitize(lines), start)
            lines = []
    if lines:
        yield Document(f"{Path(path).name}:{start}", "", _sanitize(lines), start)


def read_documents(path: str | Path, limit: int | None = None, doc_format: str = "auto") -> list[Document]:
    """Read a document corpus (``.gz`` or plain) into memory.

    Args:
        path: WikiExtractor output or blank-line-separated plain text.
        limit: keep only the first ``limit`` documents with body text (None = all).
        doc_format: ``auto`` (detect from the first non-blank line), ``wikiextractor`` or ``plain``.

    Returns:
        The documents with non-empty text, in file order.

    Raises:
        DataFileError: missing/empty file, malformed tags, or no document with body text.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"data.train_file: document corpus not found: {path}")
    if doc_format not in list(DocumentFormat):
        raise DataFileError(f"document format '{doc_format}' unknown; valid: {', '.join(DocumentFormat)}")
    if doc_format == "auto":
        doc_format = detect_format(path)
    reader = iter_wikiextractor_documents if doc_format == "wikiextractor" else iter_plain_documents
    documents: list[Document] = []
    for document in reader(path):
        documents.append(document)
        if limit is not None and len(documents) >= limit:
            break
    if not documents:
        raise DataFileError(f"{path}: no document with body text ({doc_format} format)")
    log.info("read %d documents (%s format) from %s", len(documents), doc_format, path)
    return documents
