"""Readers for NLI training data: SimCSE's triples CSV and SentEval's SNLI sentence files.

* :func:`read_nli_triples` reads SimCSE's ``nli_for_simcse.csv`` format: a CSV (``csv`` module
  quoting, optionally gzipped) with the header ``sent0,sent1,hard_neg`` (premise, entailment
  hypothesis, contradiction hypothesis) or ``sent0,sent1`` for positive pairs only. SimCSE's
  ``train.py`` decides "with hard negatives" from the column count in the same way.
* :func:`read_snli_senteval_sentences` reads the sentences of SentEval's SNLI layout
  (``s1.<split>``, ``s2.<split>``, ``labels.<split>``, one item per line, optionally gzipped).
* :func:`read_unlabelled_nli_sentences` turns any of these (or IS-BERT's
  ``nli_sentences.train.gz``, one sentence per line with extra tab-separated columns) into a
  deduplicated sentence list for unsupervised methods.

Malformed input raises :class:`~cl_bench.data.text.DataFileError` naming the file and line.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from cl_bench.data.text import DataFileError, iter_lines

#: Column headers of SimCSE's supervised CSV files, by column count.
TRIPLE_HEADER: tuple[str, ...] = ("sent0", "sent1", "hard_neg")
PAIR_HEADER: tuple[str, ...] = ("sent0", "sent1")
#: ``s1.dev``, ``s2.test.gz`` …: one side of a SentEval SNLI split.
_SENTEVAL_SNLI_FILE = re.compile(r"^s[12]\.(?P<split>[A-Za-z0-9_-]+?)(?P<gz>\.gz)?$")


def _open_csv_text(path: Path) -> io.TextIOBase:
    raw = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")  # noqa: SIM115
    # newline="" is what the csv module needs for quoted fields that contain line breaks.
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline="")


def _csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first line number of the record, cells)`` of a CSV file."""
    with _open_csv_text(path) as handle:
        reader = csv.reader(handle)
        next_line = 1
        try:
            for cells in reader:
                yield next_line, cells
                next_line = reader.line_num + 1
        except UnicodeDecodeError as err:
            raise DataFileError(f"{path}:{next_line}: not valid UTF-8 ({err.reason})") from err
        except csv.Error as err:
            raise DataFileError(f"{path}:{reader.line_num}: malformed CSV ({err})") from err


def read_nli_triples(path: str | Path, limit: int | None = None) -> list[tuple[str, ...]]:
    """Read SimCSE's supervised CSV: ``(premise, entailment[, contradiction])`` per row.

    A first row equal to ``sent0,sent1,hard_neg`` or ``sent0,sent1`` is the header (SimCSE's
    files have one); without it the first row is data. Every row must have the first row's
    column count (2 or 3) and no empty cell.

    Args:
        path: ``.csv`` or ``.csv.gz``.
        limit: keep only the first ``limit`` rows (None = all).

    Returns:
        One tuple per row, all of the same length (2 or 3).

    Raises:
        DataFileError: missing/empty file, wrong column count or empty cell, naming file:line.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"data.train_file: NLI file not found: {path}")
    rows: list[tuple[str, ...]] = []
    width = 0
    for line_no, cells in _csv_rows(path):
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue  # blank line
        if width == 0:
            width = len(cells)
            if width not in (2, 3):
                raise DataFileError(
                    f"{path}:{line_no}: expected 2 or 3 columns (sent0,sent1[,hard_neg]), got {width}"
                )
            if tuple(c.strip() for c in cells) in (TRIPLE_HEADER, PAIR_HEADER):
                continue
        if len(cells) != width:
            raise DataFileError(f"{path}:{line_no}: expected {width} columns like the first row, got {len(cells)}")
        texts = tuple(c.strip() for c in cells)
        for column, text in enumerate(texts):
            if not text:
                raise DataFileError(f"{path}:{line_no}: empty cell in column {column + 1} ({TRIPLE_HEADER[column]})")
        rows.append(texts)
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise DataFileError(f"{path}: no sentence pair (empty file or header only)")
    return rows


def senteval_snli_split(path: str | Path) -> str | None:
    """The split name when ``path`` is one side of a SentEval SNLI split (``s1.dev.gz`` → ``dev``)."""
    match = _SENTEVAL_SNLI_FILE.match(Path(path).name)
    return match.group("split") if match else None


def read_snli_senteval_sentences(path: str | Path, splits: Sequence[str] | None = None) -> list[str]:
    """Read the premises and hypotheses of SentEval's SNLI files, in file order.

    Args:
        path: one of the split files, e.g. ``<data>/nli/snli_senteval/s1.dev.gz``; its directory
            holds ``s1.<split>[.gz]`` and ``s2.<split>[.gz]``.
        splits: the splits to read from that directory (None = the split ``path`` names). For
            each split, ``s1`` (premises) then ``s2`` (hypotheses) are read.

    Returns:
        All non-blank lines, whitespace-normalised (premises repeat once per hypothesis).

    Raises:
        DataFileError: ``path`` is not a SentEval SNLI file, or a split file is missing or empty.
    """
    path = Path(path)
    own_split = senteval_snli_split(path)
    if own_split is None:
        raise DataFileError(f"{path}: not a SentEval SNLI file (expected s1.<split>[.gz] or s2.<split>[.gz])")
    gz = path.name.endswith(".gz")
    sentences: list[str] = []
    for split in splits or [own_split]:
        for side in ("s1", "s2"):
            file = path.parent / f"{side}.{split}{'.gz' if gz else ''}"
            if not file.is_file():
                raise DataFileError(f"{file}: SentEval SNLI file not found (split '{split}')")
            before = len(sentences)
            sentences.extend(" ".join(line.split()) for _, line in iter_lines(file) if line.strip())
            if len(sentences) == before:
                raise DataFileError(f"{file}: no sentence")
    return sentences


def read_unlabelled_nli_sentences(
    path: str | Path, snli_splits: Sequence[str] | None = None, limit: int | None = None
) -> list[str]:
    """Distinct sentences of an NLI corpus, for unsupervised training (IS-BERT's recipe).

    The format follows the file: a SentEval SNLI file (``s1.<split>``/``s2.<split>``, reading
    ``snli_splits`` from its directory), a SimCSE CSV (every cell), or else one sentence per
    line whose first tab-separated column is the sentence (``nli_sentences.train.gz``; plain
    one-sentence-per-line corpora read the same way).

    Args:
        path: the data file.
        snli_splits: splits read for the SentEval SNLI layout (None = the split ``path`` names).
        limit: keep only the first ``limit`` distinct sentences (None = all).

    Returns:
        Distinct, non-blank sentences in first-appearance order.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"data.train_file: corpus file not found: {path}")
    if senteval_snli_split(path) is not None:
        sentences: Sequence[str] = read_snli_senteval_sentences(path, snli_splits)
    elif path.name.endswith((".csv", ".csv.gz")):
        sentences = [text for row in read_nli_triples(path) for text in row]
    else:
        sentences = [line.split("\t", 1)[0].strip() for _, line in iter_lines(path)]
    distinct = [s for s in dict.fromkeys(sentences) if s]
    if not distinct:
        raise DataFileError(f"{path}: corpus is empty (no non-blank line)")
    return distinct[:limit] if limit is not None else distinct


#: SentEval's SNLI label names (``labels.<split>``), in a fixed class order
NLI_LABELS: tuple[str, ...] = ("contradiction", "entailment", "neutral")


def read_snli_senteval_pairs(
    path: str | Path, splits: Sequence[str] | None = None, limit: int | None = None
) -> list[tuple[str, str, int]]:
    """Read labelled pairs of SentEval's SNLI layout: ``(premise, hypothesis, label index)``.

    Args:
        path: one of the split files, e.g. ``<data>/nli/snli_senteval/s1.dev.gz``; its directory
            holds ``s1.<split>``, ``s2.<split>`` and ``labels.<split>`` (optionally gzipped).
        splits: the splits to read (None = the split ``path`` names).
        limit: keep only the first ``limit`` pairs (None = all).

    Returns:
        Pairs in file order, the label as an index into :data:`NLI_LABELS`.

    Raises:
        DataFileError: not a SentEval SNLI file, a missing file, an unknown label, or files of
            different lengths (naming the file and line).
    """
    path = Path(path)
    own_split = senteval_snli_split(path)
    if own_split is None:
        raise DataFileError(f"{path}: not a SentEval SNLI file (expected s1.<split>[.gz] or s2.<split>[.gz])")
    gz = ".gz" if path.name.endswith(".gz") else ""
    pairs: list[tuple[str, str, int]] = []
    for split in splits or [own_split]:
        columns = []
        for side in ("s1", "s2", "labels"):
            file = path.parent / f"{side}.{split}{gz}"
            if not file.is_file():
                raise DataFileError(f"{file}: SentEval SNLI file not found (split '{split}')")
            columns.append((file, [(number, " ".join(line.split())) for number, line in iter_lines(file)]))
        lengths = {len(lines) for _, lines in columns}
        if len(lengths) != 1:
            raise DataFileError(f"{columns[2][0]}: {len(columns[2][1])} labels for {len(columns[0][1])} premises")
        labels_file = columns[2][0]
        for (_, premise), (_, hypothesis), (number, label) in zip(*(lines for _, lines in columns), strict=True):
            if label not in NLI_LABELS:
                raise DataFileError(f"{labels_file}:{number}: unknown label '{label}'; valid: {', '.join(NLI_LABELS)}")
            if premise and hypothesis:
                pairs.append((premise, hypothesis, NLI_LABELS.index(label)))
    if not pairs:
        raise DataFileError(f"{path}: no labelled pair")
    return pairs[:limit] if limit is not None else pairs
