"""Reader for one-sentence-per-line corpora (plain text or .gz), e.g. SimCSE's wiki1m."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path


class DataFileError(ValueError):
    """A data file is missing, empty or malformed; the message names the file (and line)."""


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` with line ends stripped (LF or CRLF).

    Raises:
        DataFileError: naming file and line when a line is not valid UTF-8.
    """
    path = Path(path)
    line_no = 0
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as raw:
        for line_no, data in enumerate(raw, start=1):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataFileError(f"{path}:{line_no}: not valid UTF-8 ({err.reason} at byte {err.start})") from err
            if line_no == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield line_no, text.rstrip("\r\n")


def check_text_file(path: str | Path) -> None:
    """Validate a corpus before any model loads: exists, UTF-8 throughout, at least one sentence."""
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"data.train_file: corpus file not found: {path}")
    non_blank = 0
    for _, line in iter_lines(path):  # reads every line: a bad byte anywhere is reported now
        non_blank += bool(line.strip())
    if not non_blank:
        raise DataFileError(f"{path}: corpus is empty (no non-blank line)")


def read_sentences(path: str | Path, limit: int | None = None) -> list[str]:
    """Read a one-sentence-per-line corpus, skipping blank lines.

    Args:
        path: ``.txt`` or ``.txt.gz``.
        limit: keep only the first ``limit`` sentences (None = all).
    """
    sentences: list[str] = []
    for _, line in iter_lines(path):
        if line.strip():
            sentences.append(line.strip())
            if limit is not None and len(sentences) >= limit:
                break
    if not sentences:
        raise DataFileError(f"{path}: corpus is empty (no non-blank line)")
    return sentences
