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


#: the fewest items a corpus may give: in-batch negatives need two of them in a batch, whatever the method reads
MIN_ITEMS = 2

#: corpora already checked in this process, by (path, size, mtime): ``cl-bench`` checks before Hydra's job and the
#: job again, which then costs nothing for an unchanged file
_CHECKED: set[tuple[str, int, int]] = set()


def check_text_file(path: str | Path, limit: int | None = None) -> None:
    """Validate a corpus before any model loads, whatever its format (the method's reader needs the model; these
    checks need none): it exists, reads (a ``.gz`` decompresses), holds no NUL byte (a binary file), is UTF-8
    throughout, and has at least :data:`MIN_ITEMS` non-blank lines (of the first ``limit``, ``data.limit``): a
    one-sentence file gives no batch to train on.

    Raises:
        DataFileError: one line naming ``data.train_file``, the file and the line where it applies.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"data.train_file: corpus file not found: {path}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key in _CHECKED:
        return
    non_blank = 0
    try:
        for line_no, line in iter_lines(path):  # reads every line: a bad byte anywhere is reported now
            if "\x00" in line:
                raise DataFileError(f"data.train_file: {path}:{line_no}: a NUL byte: a binary file, not a text corpus")
            non_blank += bool(line.strip())
    except (OSError, EOFError) as err:  # a truncated or fake .gz, an unreadable file
        raise DataFileError(f"data.train_file: {path}: cannot be read ({err})") from err
    except DataFileError as err:
        text = str(err)
        raise DataFileError(text if text.startswith("data.train_file") else f"data.train_file: {text}") from err
    if not non_blank:
        raise DataFileError(f"data.train_file: {path}: corpus is empty (no non-blank line)")
    items = non_blank if limit is None else min(non_blank, int(limit))
    if items < MIN_ITEMS:
        given = f" (data.limit={limit})" if limit is not None and limit < non_blank else ""
        raise DataFileError(f"data.train_file: {path}: {items} non-blank line{'s' * (items != 1)}{given}; training "
                            f"needs at least {MIN_ITEMS} items (in-batch negatives)")
    _CHECKED.add(key)


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
