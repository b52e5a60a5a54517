"""Bad data never gives a silent wrong score: handled as SentEval handles it, or stopped with file:line."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from cl_bench.data.senteval import read_sick_split, read_sts_subset, read_stsb_split
from cl_bench.data.text import DataFileError, check_text_file, read_sentences

STSB_ROW = "main-captions\tMSRvid\t2012test\t0001\t{score}\ta man plays .\ta man is playing .\n"


def test_corpus_blank_lines_crlf_and_bom_are_handled(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes("\ufeffFirst sentence.\r\n\r\n   \nSecond one.\r\nThird\n".encode())
    assert read_sentences(path) == ["First sentence.", "Second one.", "Third"]
    gz = tmp_path / "corpus.txt.gz"
    with gzip.open(gz, "wb") as fh:
        fh.write(path.read_bytes())
    assert read_sentences(gz) == ["First sentence.", "Second one.", "Third"]


def test_corpus_non_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"ok\nstill ok\n\xff\xfe broken\n")
    with pytest.raises(DataFileError, match=r"corpus.txt:3: not valid UTF-8"):
        read_sentences(path)


@pytest.mark.parametrize(("content", "limit", "why"), [
    (b"", None, "corpus is empty (no non-blank line)"),
    (b"\n  \n", None, "corpus is empty (no non-blank line)"),
    (b"only one sentence\n", None, "1 non-blank line; training needs at least 2 items"),
    (b"one\ntwo\n", 1, "1 non-blank line (data.limit=1); training needs at least 2 items"),
    (b"text\n\x00\x01\x02\n", None, ":2: a NUL byte: a binary file"),
    (b"ok\n\xe9t\xe9\n", None, ":2: not valid UTF-8"),
])
def test_a_corpus_that_cannot_train_is_named_before_any_model(tmp_path: Path, content: bytes, limit: int | None,
                                                              why: str) -> None:
    """check_text_file (run by cl-bench before torch and by the job's preflight) names the key, the file and why."""
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    with pytest.raises(DataFileError) as err:
        check_text_file(path, limit)
    assert str(err.value).startswith(f"data.train_file: {path}") and why in str(err.value)
    path.write_bytes(b"a first sentence\na second\n")  # the same file, fixed (and no data.limit below 2): passes
    check_text_file(path)


def test_a_fake_or_cut_gzip_corpus_is_named(tmp_path: Path) -> None:
    fake = tmp_path / "fake.txt.gz"
    fake.write_bytes(b"not gzip at all\n")
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(gzip.compress(b"one\ntwo\nthree\n" * 100)[:40])
    for path in (fake, cut):
        with pytest.raises(DataFileError, match=rf"^data\.train_file: {path}: cannot be read"):
            check_text_file(path)


def _sts(folder: Path, inputs: bytes, gold: bytes) -> None:
    (folder / "STS.input.x.txt").write_bytes(inputs)
    (folder / "STS.gs.x.txt").write_bytes(gold)


def test_sts_crlf_reads_like_lf_and_blank_gold_lines_are_unscored(tmp_path: Path) -> None:
    _sts(tmp_path, b"a b\tc d\nskip\tme\ne f\tg h\n", b"4.5\n\n1.0\n")
    lf = read_sts_subset(tmp_path, "x")
    _sts(tmp_path, b"a b\tc d\r\nskip\tme\r\ne f\tg h\r\n", b"4.5\r\n\r\n1.0\r\n")
    crlf = read_sts_subset(tmp_path, "x")
    assert crlf.sent1 == lf.sent1 == ("a b", "e f") and crlf.gold.tolist() == lf.gold.tolist() == [4.5, 1.0]


def test_sts_non_numeric_gold_and_bad_bytes_name_file_and_line(tmp_path: Path) -> None:
    _sts(tmp_path, b"a\tb\nc\td\n", b"4.5\nhigh\n")
    with pytest.raises(DataFileError, match=r"STS.gs.x.txt:2: gold score 'high' is not a number"):
        read_sts_subset(tmp_path, "x")
    _sts(tmp_path, b"a\tb\nc\xff\td\n", b"4.5\n1\n")
    with pytest.raises(DataFileError, match=r"STS.input.x.txt:2: not valid utf-8"):
        read_sts_subset(tmp_path, "x")
    _sts(tmp_path, b"a\tb\nonly one column\n", b"4.5\n1\n")
    with pytest.raises(DataFileError, match=r"STS.input.x.txt:2: expected 2 tab-separated sentences"):
        read_sts_subset(tmp_path, "x")


def test_stsb_missing_columns_and_non_numeric_scores(tmp_path: Path) -> None:
    path = tmp_path / "sts-test.csv"
    path.write_text(STSB_ROW.format(score="5.0") + "main-captions\tMSRvid\t2012test\t0002\n")
    with pytest.raises(DataFileError, match=r"sts-test.csv:2: expected at least 7 tab-separated columns, got 4"):
        read_stsb_split(path)
    path.write_text(STSB_ROW.format(score="5.0") + STSB_ROW.format(score="n/a"))
    with pytest.raises(DataFileError, match=r"sts-test.csv:2: score 'n/a' is not a number"):
        read_stsb_split(path)
    path.write_bytes(("\r\n".join(STSB_ROW.format(score=s).rstrip("\n") for s in ("5.0", "1.5")) + "\r\n").encode())
    assert read_stsb_split(path).gold.tolist() == [5.0, 1.5]  # CRLF handled


def test_sick_header_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "SICK_test_annotated.txt"
    rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment",
            "1\tA dog runs\tA dog is running\t4.6\tENTAILMENT", "2\tA cat\tA car\tx\tNEUTRAL"]
    path.write_bytes("\r\n".join(rows[:2]).encode() + b"\r\n")
    assert read_sick_split(path).gold.tolist() == [4.6]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(DataFileError, match=r"SICK_test_annotated.txt:3: relatedness score 'x' is not a number"):
        read_sick_split(path)
