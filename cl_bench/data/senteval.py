"""Readers for the SentEval data formats (STS12–16, STS-B, SICK, and the seven transfer tasks).

Each reader reproduces how SentEval (as shipped with SimCSE) reads its files, because that
decides which pairs are scored and which sentences the encoder sees:

* sentences are split on whitespace into word lists, which SimCSE's batcher re-joins with
  single spaces: every text returned here is ``" ".join(line.split())``;
* STS12–16 (``STS.input.<subset>.txt`` / ``STS.gs.<subset>.txt``) are read as UTF-8 with
  ``str.splitlines()``; pairs whose gold line is empty are unscored and dropped (STS15/16);
* STS-B ``sts-*.csv`` (columns 5, 6, score in 4) and SICK ``SICK_*.txt`` (header row, columns
  1, 2, score in 3) are read line by line with universal newlines, so SICK's CRLF is harmless;
* MR/CR/SUBJ/MPQA are read as latin-1 with ``str.splitlines()``, which also splits at byte
  0x85 (NEL): SentEval therefore sees 5344 + 5341 MR and 5000 + 5021 SUBJ samples, some of
  them empty, and so does cl-bench;
* SST-2 (``sentence<TAB>label``), TREC (latin-1, ``COARSE:fine question``) and MRPC (UTF-8,
  header row, label in column 0, sentences in columns 3 and 4).

Readers return texts in file order; the SentEval sort orders that the transfer protocol depends
on are applied by :mod:`cl_bench.eval.transfer`. Malformed lines raise
:class:`~cl_bench.data.text.DataFileError` naming the file and line.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cl_bench.data.text import DataFileError

#: TREC coarse classes in SentEval's label order.
TREC_CLASSES: tuple[str, ...] = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


@dataclass(frozen=True, eq=False)
class ScoredPairs:
    """Sentence pairs with gold similarity scores (one STS subset or split).

    Attributes:
        sent1: first sentences.
        sent2: second sentences, aligned with ``sent1``.
        gold: (N,) float64 gold scores.
    """

    sent1: tuple[str, ...]
    sent2: tuple[str, ...]
    gold: np.ndarray

    def __len__(self) -> int:
        return len(self.gold)


@dataclass(frozen=True, eq=False)
class LabeledTexts:
    """Single sentences with integer class labels."""

    texts: tuple[str, ...]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True, eq=False)
class LabeledPairs:
    """Sentence pairs with integer class labels (MRPC)."""

    sent1: tuple[str, ...]
    sent2: tuple[str, ...]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def join_words(text: str) -> str:
    """SentEval's word list re-joined as SimCSE's batcher does: whitespace runs become one space."""
    return " ".join(text.split())


def _decode(path: Path, encoding: str) -> str:
    """The whole file decoded, line ends untouched (``open(..., newline="")``); a decoding error names the file
    and line."""
    if not path.is_file():
        raise DataFileError(f"{path}: file not found")
    raw = path.read_bytes()
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as err:
        line_no = raw.count(b"\n", 0, err.start) + 1
        raise DataFileError(f"{path}:{line_no}: not valid {encoding} ({err.reason} at byte {err.start})") from err


def _read_lines(path: Path, encoding: str) -> list[str]:
    """File lines as ``for line in io.open(path)`` yields them (universal newlines), ends kept."""
    return list(io.StringIO(_decode(path, encoding), newline=None))


def _number(value: str, kind: type[float] | type[int], path: Path, line_no: int, what: str) -> float:
    """``kind(value)`` (float or int); a bad value names the file, the line and ``what`` it is."""
    try:
        return kind(value)
    except ValueError as err:
        expected = "a number" if kind is float else "an integer"
        raise DataFileError(f"{path}:{line_no}: {what} {value!r} is not {expected}") from err


def _columns(line: str, path: Path, line_no: int, needed: int) -> list[str]:
    fields = line.strip().split("\t")
    if len(fields) < needed:
        raise DataFileError(
            f"{path}:{line_no}: expected at least {needed} tab-separated columns, got {len(fields)}"
        )
    return fields


# ------------------------------------------------------------------------------------------------
# STS
# ------------------------------------------------------------------------------------------------
def read_sts_subset(folder: str | Path, subset: str) -> ScoredPairs:
    """Read one STS12–16 sub-dataset (``STS.input.<subset>.txt`` + ``STS.gs.<subset>.txt``).

    Args:
        folder: the year folder, e.g. ``<data>/sts/STS12-en-test``.
        subset: the sub-dataset name, e.g. ``MSRpar``.

    Returns:
        The scored pairs in file order (see :func:`read_sts_pair_files`).
    """
    folder = Path(folder)
    return read_sts_pair_files(folder / f"STS.input.{subset}.txt", folder / f"STS.gs.{subset}.txt")


def read_sts_pair_files(input_path: str | Path, gold_path: str | Path) -> ScoredPairs:
    """Read SentEval's STS12–16 format: a file of tab-separated sentence pairs and a file of gold scores.

    Lines are split with ``str.splitlines()`` as SentEval does; pairs whose gold line is blank
    are not scored and are dropped.

    Returns:
        The scored pairs in file order.
    """
    input_path, gold_path = Path(input_path), Path(gold_path)
    input_lines = _decode(input_path, "utf-8").splitlines()
    gold_lines = _decode(gold_path, "utf-8").splitlines()
    if len(input_lines) != len(gold_lines):
        raise DataFileError(
            f"{gold_path}: {len(gold_lines)} lines, but {input_path.name} has {len(input_lines)}"
        )
    sent1: list[str] = []
    sent2: list[str] = []
    gold: list[float] = []
    for line_no, (line, score) in enumerate(zip(input_lines, gold_lines, strict=True), start=1):
        if not score.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataFileError(
                f"{input_path}:{line_no}: expected 2 tab-separated sentences, got {len(fields)} fields"
            )
        sent1.append(join_words(fields[0]))
        sent2.append(join_words(fields[1]))
        gold.append(_number(score, float, gold_path, line_no, "gold score"))
    if not gold:
        raise DataFileError(f"{gold_path}: no scored pair")
    return ScoredPairs(tuple(sent1), tuple(sent2), np.asarray(gold, dtype=np.float64))


def _tab_pairs(
    path: Path, header: bool, needed: int, first: int, second: int, value: int, kind: type[float] | type[int], what: str
) -> tuple[tuple[str, ...], tuple[str, ...], list[float]]:
    """The sentence pairs (columns ``first`` and ``second``) and values (column ``value``, parsed as ``kind``)
    of a UTF-8 tab-separated file read line by line; ``header``: its first line is a header row."""
    sent1: list[str] = []
    sent2: list[str] = []
    values: list[float] = []
    for line_no, line in enumerate(_read_lines(path, "utf-8"), start=1):
        if header and line_no == 1:  # header row (MRPC's starts with a BOM in the distributed files)
            continue
        fields = _columns(line, path, line_no, needed)
        sent1.append(join_words(fields[first]))
        sent2.append(join_words(fields[second]))
        values.append(_number(fields[value], kind, path, line_no, what))
    if not values:
        raise DataFileError(f"{path}: no pair")
    return tuple(sent1), tuple(sent2), values


def read_stsb_split(path: str | Path) -> ScoredPairs:
    """Read an STS Benchmark ``sts-{train,dev,test}.csv`` (score in column 4, sentences in 5 and 6)."""
    sent1, sent2, gold = _tab_pairs(Path(path), False, 7, 5, 6, 4, float, "score")
    return ScoredPairs(sent1, sent2, np.asarray(gold, dtype=np.float64))


def read_sick_split(path: str | Path) -> ScoredPairs:
    """Read a SICK ``SICK_{train,trial,test_annotated}.txt`` (header row; relatedness in column 3)."""
    sent1, sent2, gold = _tab_pairs(Path(path), True, 4, 1, 2, 3, float, "relatedness score")
    return ScoredPairs(sent1, sent2, np.asarray(gold, dtype=np.float64))


# ------------------------------------------------------------------------------------------------
# Transfer tasks
# ------------------------------------------------------------------------------------------------
def read_latin1_samples(path: str | Path) -> list[str]:
    """Read an MR/CR/SUBJ/MPQA file: latin-1, ``str.splitlines()`` (which also splits at 0x85)."""
    path = Path(path)
    samples = [join_words(line) for line in _decode(path, "latin-1").splitlines()]
    if not samples:
        raise DataFileError(f"{path}: empty file")
    return samples


def read_binary_task(positive_file: str | Path, negative_file: str | Path) -> LabeledTexts:
    """Read a SentEval binary task: positives (label 1) followed by negatives (label 0).

    For SUBJ, SentEval passes ``subj.objective`` as the positive file.
    """
    positives = read_latin1_samples(positive_file)
    negatives = read_latin1_samples(negative_file)
    labels = np.array([1] * len(positives) + [0] * len(negatives), dtype=np.int64)
    return LabeledTexts(tuple(positives + negatives), labels)


def read_sst_split(path: str | Path) -> LabeledTexts:
    """Read an SST binary ``sentiment-{train,dev,test}`` file (``sentence<TAB>label``)."""
    path = Path(path)
    texts: list[str] = []
    labels: list[int] = []
    for line_no, line in enumerate(_read_lines(path, "utf-8"), start=1):
        fields = _columns(line, path, line_no, 2)
        texts.append(join_words(fields[0]))
        labels.append(_number(fields[1], int, path, line_no, "label"))
    if not labels:
        raise DataFileError(f"{path}: empty file")
    return LabeledTexts(tuple(texts), np.asarray(labels, dtype=np.int64))


def read_trec_file(path: str | Path) -> LabeledTexts:
    """Read a TREC ``*.label`` file (latin-1, ``COARSE:fine question words``), coarse labels only."""
    path = Path(path)
    class_index = {name: index for index, name in enumerate(TREC_CLASSES)}
    texts: list[str] = []
    labels: list[int] = []
    for line_no, line in enumerate(_read_lines(path, "latin-1"), start=1):
        target, sep, rest = line.strip().partition(":")
        question = rest.split(" ", 1)
        if not sep or len(question) < 2:
            raise DataFileError(
                f"{path}:{line_no}: expected 'COARSE:fine question', got {line.strip()[:60]!r}"
            )
        if target not in class_index:
            raise DataFileError(
                f"{path}:{line_no}: unknown TREC class {target!r}; valid: {', '.join(TREC_CLASSES)}"
            )
        texts.append(join_words(question[1]))
        labels.append(class_index[target])
    if not labels:
        raise DataFileError(f"{path}: empty file")
    return LabeledTexts(tuple(texts), np.asarray(labels, dtype=np.int64))


def read_mrpc_file(path: str | Path) -> LabeledPairs:
    """Read an MRPC ``msr_paraphrase_{train,test}.txt`` (header row; label, id, id, sentence, sentence)."""
    sent1, sent2, labels = _tab_pairs(Path(path), True, 5, 3, 4, 0, int, "label")
    return LabeledPairs(sent1, sent2, np.asarray(labels, dtype=np.int64))
