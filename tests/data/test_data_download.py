"""cl-bench-data: real downloads from a local HTTP server (127.0.0.1 only), resume, checksums, verify."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import re
import shutil
import socket
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cl_bench.data import download as dl

MANIFEST = dl.load_manifest()
FILES = MANIFEST["files"]


# ------------------------------------------------------------------------------------------------
# A real HTTP server with Range support, and a switch to cut one transfer short
# ------------------------------------------------------------------------------------------------
class _RangeHandler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        body = self.server.files.get(self.path)
        self.server.requests.append((self.path, self.headers.get("Range")))
        if body is None:
            self.send_error(404)
            return
        start, status = 0, 200
        if (value := self.headers.get("Range")) is not None:
            start = int(re.fullmatch(r"bytes=(\d+)-\d*", value).group(1))
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        chunk = body[start:]
        self.send_response(status)
        self.send_header("Content-Length", str(len(chunk)))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.end_headers()
        cut = self.server.cut_once.pop(self.path, None)
        if cut is not None:  # send part of the body, then drop the connection
            self.wfile.write(chunk[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(chunk)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RangeHandler)
        self.files: dict[str, bytes] = {}
        self.cut_once: dict[str, int] = {}
        self.requests: list[tuple[str, str | None]] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture()
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def _senteval_member(rel: str) -> str:
    """Where a data-root file sits in SentEval's downstream/ layout (as senteval.tar ships it)."""
    parts = rel.split("/")
    if parts[0] == "sts":
        return "/".join(parts[1:]) if parts[1] == "SICK" else "STS/" + "/".join(parts[1:])
    if parts[0] == "transfer":
        return "/".join(parts[1:])
    return "SNLI/" + parts[-1].removesuffix(".gz")  # nli/snli_senteval/*.gz


def _senteval_tar(root: Path) -> bytes:
    """senteval.tar in SentEval's layout, built from the real files of the data root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel in MANIFEST["sources"][0]["yields"]:
            data = (root / rel).read_bytes()
            if rel.endswith(".gz"):
                data = gzip.decompress(data)  # SentEval ships SNLI uncompressed
            info = tarfile.TarInfo("downstream/" + _senteval_member(rel))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------
# verify
# ------------------------------------------------------------------------------------------------
def test_verify_real_root_passes_and_reports_sts_pair_counts(data_dir: Path, capsys: pytest.CaptureFixture) -> None:
    report = dl.verify(data_dir)
    assert report.ok, report.problems
    totals = {name: sum(counts.values()) for name, counts in report.sts_pairs.items()}
    # SOURCES.md: scored pairs per STS set.
    assert totals == {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186,
                      "STSBenchmark": 5749 + 1500 + 1379, "SICK": 4500 + 500 + 4927}
    assert report.sts_pairs["STS15"]["answers-forums"] == 375
    assert report.sts_pairs["SICK"]["test_annotated"] == 4927
    assert all(c.state == "ok" for c in report.checks["senteval"])
    assert dl.main(["verify", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "STS12: 3108 scored pairs" in out and "STS16: 1186 scored pairs" in out
    assert "absent    wiki1m (optional)" in out and out.rstrip().endswith("verify: OK")


def test_verify_names_missing_and_truncated_files_and_the_fix(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    root = tmp_path / "data"
    for folder in ("sts", "transfer", "nli/snli_senteval"):
        shutil.copytree(data_dir / folder, root / folder)
    (root / "sts/STS12-en-test/STS.input.MSRpar.txt").unlink()
    truncated = root / "transfer/MR/rt-polarity.pos"
    truncated.chmod(0o644)
    truncated.write_bytes((data_dir / "transfer/MR/rt-polarity.pos").read_bytes()[:1000])

    assert dl.main(["verify", "--data-dir", str(root)]) == 1
    out = capsys.readouterr().out
    fix = f"cl-bench-data download --only senteval --data-dir {root}"
    assert re.search(r"MISSING\s+sts/STS12-en-test/STS.input.MSRpar.txt — fix: run `" + re.escape(fix), out)
    assert re.search(r"CORRUPT\s+transfer/MR/rt-polarity.pos: 1000 bytes, expected 629423", out)
    assert "PAIRS     STS12: MSRpar missing (expected 750)" in out
    assert "verify: 3 problem(s)" in out


def test_list_shows_what_is_there(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert dl.main(["list", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^senteval\s+complete\s+112/112", out, re.M)
    assert re.search(r"^wiki1m\s+absent\s+0/1", out, re.M)
    assert dl.main(["list", "--data-dir", str(tmp_path)]) == 0
    assert re.search(r"^senteval\s+absent", capsys.readouterr().out, re.M)


# ------------------------------------------------------------------------------------------------
# download
# ------------------------------------------------------------------------------------------------
def test_download_senteval_archive_end_to_end(
    server: _Server, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    server.files["/hub/senteval.tar"] = tar_bytes = _senteval_tar(data_dir)
    root = tmp_path / "root"
    rc = dl.main([
        "download", "--only", "senteval", "snli_devtest_triples", "--data-dir", str(root),
        "--url", f"senteval={server.base}/hub", "--no-progress",
    ])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "verify: OK" in out and "STS12: 3108 scored pairs" in out
    assert server.requests == [("/hub/senteval.tar", None)]
    for rel in MANIFEST["sources"][0]["yields"]:
        assert (root / rel).is_file(), rel
    # SNLI arrives uncompressed and is stored gzipped: same content as the reference copy.
    assert dl.sha256_file(root / "nli/snli_senteval/s1.dev.gz", decompress=True) == \
        FILES["nli/snli_senteval/s1.dev.gz"]["content_sha256"]
    # Triples rebuilt with SimCSE's recipe from SNLI dev+test equal the reference file's content.
    triples = "nli/snli_devtest_triples_for_simcse.csv.gz"
    assert dl.sha256_file(root / triples, decompress=True) == FILES[triples]["content_sha256"]
    assert not (root / dl.DOWNLOADS_DIR / "senteval.tar").exists()  # archive removed after extraction
    record = dl.read_record(root)
    assert record["downloads"]["senteval.tar"]["sha256"] == hashlib.sha256(tar_bytes).hexdigest()
    # A second run finds everything verified and fetches nothing.
    assert dl.download(root, ["senteval"], progress=False, log=lambda _: None) == {"senteval": "present"}
    assert len(server.requests) == 1


def _serve_wikitext(server: _Server, data_dir: Path) -> dict[str, bytes]:
    files = {}
    for name in ("valid.txt", "test.txt", "README"):
        files[name] = (data_dir / "corpus/wikitext-2" / name).read_bytes()
        server.files[f"/wt2/{name}"] = files[name]
    return files


def test_download_resumes_after_a_cut_connection(server: _Server, data_dir: Path, tmp_path: Path) -> None:
    _serve_wikitext(server, data_dir)
    server.cut_once["/wt2/valid.txt"] = 300_000
    root = tmp_path / "root"
    urls = {"wikitext2": f"{server.base}/wt2"}
    quiet = {"progress": False, "log": lambda _: None}
    # No retries in this call: it stops with the partial file kept and says how to resume.
    with pytest.raises(dl.DataDownloadError, match=r"300000 bytes kept in .*valid.txt.part — run the same command"):
        dl.download(root, ["wikitext2"], url_overrides=urls, retries=0, **quiet)
    part = root / "corpus/wikitext-2/valid.txt.part"
    assert part.stat().st_size == 300_000
    # The next call resumes with a Range request and completes with the right checksum.
    assert dl.download(root, ["wikitext2"], url_overrides=urls, **quiet) == {"wikitext2": "downloaded"}
    assert ("/wt2/valid.txt", "bytes=300000-") in server.requests
    assert not part.exists()
    for rel in ("corpus/wikitext-2/valid.txt", "corpus/wikitext-2/test.txt", "corpus/wikitext-2/README"):
        assert dl.sha256_file(root / rel) == FILES[rel]["sha256"]


def test_download_retries_a_cut_transfer_within_one_call(
    server: _Server, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _serve_wikitext(server, data_dir)
    server.cut_once["/wt2/test.txt"] = 123_457
    monkeypatch.setenv("CL_BENCH_URL_WIKITEXT2", f"{server.base}/wt2")  # env override of the base URL
    root = tmp_path / "root"
    assert dl.download(root, ["wikitext2"], progress=False, log=lambda _: None) == {"wikitext2": "downloaded"}
    ranges = [r for p, r in server.requests if p == "/wt2/test.txt"]
    assert ranges == [None, "bytes=123457-"]
    assert dl.sha256_file(root / "corpus/wikitext-2/test.txt") == FILES["corpus/wikitext-2/test.txt"]["sha256"]


def test_corrupted_download_is_caught_by_its_checksum(
    server: _Server, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    files = _serve_wikitext(server, data_dir)
    damaged = bytearray(files["valid.txt"])
    damaged[50_000] ^= 0x20  # one flipped bit, same size
    server.files["/wt2/valid.txt"] = bytes(damaged)
    root = tmp_path / "root"
    rc = dl.main(["download", "--only", "wikitext2", "--data-dir", str(root), "--url",
                  f"wikitext2={server.base}/wt2", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "valid.txt: checksum mismatch" in err and "corrupt and was removed" in err
    assert not (root / "corpus/wikitext-2/valid.txt").exists()
    assert not (root / "corpus/wikitext-2/valid.txt.part").exists()


def test_offline_fails_at_once_and_says_where_to_put_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "root"
    dead = f"http://127.0.0.1:{_closed_port()}"
    start = time.perf_counter()
    rc = dl.main(["download", "--only", "senteval", "wiki1m", "--data-dir", str(root), "--no-progress",
                  "--url", f"senteval={dead}", "--url", f"wiki1m={dead}"])
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert rc == 1 and elapsed < 5
    assert "cannot connect" in err and "Put the files by hand" in err
    assert f"{dead}/senteval.tar  ->  {root / '.downloads' / 'senteval.tar'}" in err
    assert f"{dead}/wiki1m_for_simcse.txt  ->  {root / 'corpus/wiki1m_for_simcse.txt'}" in err


def test_files_put_by_hand_are_used_without_network(data_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ".downloads").mkdir(parents=True)
    (root / ".downloads" / "senteval.tar").write_bytes(_senteval_tar(data_dir))
    shutil.copytree(data_dir / "corpus/wikitext-2", root / "corpus/wikitext-2")
    dead = f"http://127.0.0.1:{_closed_port()}"
    status = dl.download(root, ["senteval", "wikitext2"], url_overrides={"senteval": dead, "wikitext2": dead},
                         progress=False, log=lambda _: None)
    assert status == {"senteval": "downloaded", "wikitext2": "present"}
    assert dl.verify(root, ["senteval", "wikitext2"]).ok


def test_unpublished_checksum_is_recorded_on_download_then_enforced(server: _Server, tmp_path: Path) -> None:
    # wiki1m has no published sha256: the manifest pins its line count and the first download records one.
    corpus = b"".join(b"sentence %d .\n" % i for i in range(1_000_000))
    server.files["/hub/wiki1m_for_simcse.txt"] = corpus
    root = tmp_path / "root"
    dl.download(root, ["wiki1m"], url_overrides={"wiki1m": f"{server.base}/hub"}, progress=False, log=lambda _: None)
    rel = "corpus/wiki1m_for_simcse.txt"
    assert dl.read_record(root)["files"][rel]["sha256"] == hashlib.sha256(corpus).hexdigest()
    (check,) = dl.verify(root, ["wiki1m"]).checks["wiki1m"]
    assert check.state == "ok" and "recorded at download" in check.detail
    # Same line count, different bytes: caught against the record.
    (root / rel).write_bytes(corpus.replace(b"sentence 5 .", b"sentence 6 ."))
    report = dl.verify(root, ["wiki1m"])
    assert not report.ok and "differs from the one recorded at download" in report.problems[0]
    # Truncated: caught by the line count.
    (root / rel).write_bytes(corpus[:100_000])
    assert "lines, expected 1000000" in dl.verify(root, ["wiki1m"]).problems[0]


def test_concatenated_parts_are_fetched_and_gzipped(server: _Server, data_dir: Path, tmp_path: Path) -> None:
    parts = [(data_dir / "corpus/wikitext-2" / n).read_bytes() for n in ("valid.txt", "test.txt", "README")]
    for i, body in enumerate(parts):
        server.files[f"/docs/part_{i}"] = body
    whole = b"".join(parts)
    target = "corpus/docs.txt.gz"
    manifest = {
        "sources": [{
            "name": "docs", "kind": "concat_gzip", "description": "three parts", "base_url": f"{server.base}/docs",
            "downloads": [{"remote": f"part_{i}"} for i in range(3)], "target": target, "yields": [target],
        }],
        "files": {target: {"sha256": "0" * 64, "content_sha256": hashlib.sha256(whole).hexdigest()}},
        "sts_pairs": {},
    }
    root = tmp_path / "root"
    assert dl.download(root, manifest=manifest, progress=False, log=lambda _: None) == {"docs": "downloaded"}
    assert gzip.decompress((root / target).read_bytes()) == whole
    assert not (root / dl.DOWNLOADS_DIR / "docs").exists()


# ------------------------------------------------------------------------------------------------
# archives
# ------------------------------------------------------------------------------------------------
def _cat_v(data: bytes) -> bytes:
    """SentEval's `cat -v` notation for bytes >= 0x80 (its MR/SUBJ files are written this way)."""
    out = bytearray()
    for byte in data:
        if byte < 0x80:
            out.append(byte)
        elif byte - 0x80 < 32:
            out += b"M-^" + bytes([byte - 0x80 + 64])
        else:
            out += b"M-" + bytes([byte - 0x80])
    return bytes(out)


def test_extract_zip_and_tar_gz_into_senteval_layout(data_dir: Path, tmp_path: Path) -> None:
    rules = MANIFEST["sources"][0]["extract"]
    mr = (data_dir / "transfer/MR/rt-polarity.pos").read_bytes()
    zipped = tmp_path / "senteval.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as zf:
        prefix = "SentEval/data/downstream/"
        zf.write(data_dir / "sts/STS12-en-test/STS.input.MSRpar.txt", prefix + "STS/STS12-en-test/STS.input.MSRpar.txt")
        zf.write(data_dir / "sts/SICK/SICK_trial.txt", prefix + "SICK/SICK_trial.txt")
        zf.writestr(prefix + "MR/rt-polarity.pos", _cat_v(mr))
        zf.writestr(prefix + "SNLI/labels.dev", gzip.decompress((data_dir / "nli/snli_senteval/labels.dev.gz").read_bytes()))
        zf.writestr("__MACOSX/SentEval/._MR", b"junk")
        zf.writestr("../STS/evil.txt", b"outside")
        zf.writestr(prefix + "COCO/train.pkl", b"not used by cl-bench")
    tgz = tmp_path / "stsb.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(data_dir / "sts/STSBenchmark/sts-dev.csv", "STS/STSBenchmark/sts-dev.csv")

    root = tmp_path / "root"
    written = dl.extract_archive(zipped, root, rules) + dl.extract_archive(tgz, root, rules)
    assert written == [
        "sts/STS12-en-test/STS.input.MSRpar.txt", "sts/SICK/SICK_trial.txt", "transfer/MR/rt-polarity.pos",
        "nli/snli_senteval/labels.dev.gz", "sts/STSBenchmark/sts-dev.csv",
    ]
    record = {"files": {}, "downloads": {}}
    checks = {rel: dl.check_file(root, rel, FILES[rel], record) for rel in written}
    assert all(c.state == "ok" for c in checks.values()), checks
    assert "alternative form" in checks["transfer/MR/rt-polarity.pos"].detail  # SentEval's cat -v form accepted
    assert "gunzipped content" in checks["nli/snli_senteval/labels.dev.gz"].detail
    assert not (tmp_path / "STS").exists() and not list(root.rglob("evil.txt"))
    not_archive = tmp_path / "plain.txt"
    not_archive.write_text("hello")
    with pytest.raises(dl.DataDownloadError, match="not a tar or zip archive"):
        dl.extract_archive(not_archive, root, rules)


def test_manifest_covers_every_file_of_the_reference_root(data_dir: Path) -> None:
    on_disk = {p.relative_to(data_dir).as_posix() for p in data_dir.rglob("*") if p.is_file()} - {"SOURCES.md"}
    in_manifest = {rel for rel, entry in FILES.items() if entry["sha256"]}
    assert on_disk == in_manifest
    # Files without a published checksum are exactly the ones absent from the reference root.
    assert {rel for rel, entry in FILES.items() if entry["sha256"] is None} == {
        "corpus/wiki1m_for_simcse.txt", "nli/nli_for_simcse.csv"}
    assert [s["downloads"][0]["sha256"] for s in MANIFEST["sources"] if s["name"] == "senteval"] == [None]


def test_bad_arguments_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert dl.main(["download", "--only", "wiki2m", "--data-dir", str(tmp_path / "new")]) == 2  # bad input: 2
    assert "--only: unknown source 'wiki2m'; valid:" in capsys.readouterr().err
    assert dl.main(["download", "--url", "nourl", "--data-dir", str(tmp_path / "new")]) == 2
    assert "--url: expected NAME=URL, got 'nourl'" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # a rejected command makes no data root


# ------------------------------------------------------------------------------------------------
# First use: the main job fetches what it needs (cl_bench.config.validate -> ensure_data)
# ------------------------------------------------------------------------------------------------
def _main_job(tiny_bert: Path, *overrides: str):
    """The README's main job, ``cl-bench method=simcse loss.tau=0.05``, composed (the tiny BERT as encoder)."""
    from hydra import compose, initialize_config_dir

    from cl_bench.commands.cli import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=["method=simcse", "loss.tau=0.05", f"model.name_or_path={tiny_bert}",
                                            *overrides])


@pytest.fixture()
def first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user with no data root yet and the network on: the default root under the cache directory."""
    for var in ("CL_BENCH_DATA", "CL_BENCH_CACHE", "HF_HUB_OFFLINE", dl.DATA_OFFLINE_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "cl-bench" / "data"


def test_main_job_fetches_its_data_on_first_use(
    server: _Server, data_dir: Path, tiny_bert: Path, first_use: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    from cl_bench.config import preflight

    server.files["/hub/senteval.tar"] = _senteval_tar(data_dir)
    corpus = b"".join(b"sentence %d of the corpus .\n" % i for i in range(1_000_000))  # wiki1m's line count
    server.files["/hub/wiki1m_for_simcse.txt"] = corpus
    server.cut_once["/hub/wiki1m_for_simcse.txt"] = 2_000_000  # a cut connection on the way: resumed
    for source in ("SENTEVAL", "WIKI1M"):
        monkeypatch.setenv(f"CL_BENCH_URL_{source}", f"{server.base}/hub")
    cfg = _main_job(tiny_bert)
    assert cfg.paths.data_dir == str(first_use)  # the default data root: the user's cache directory

    preflight(cfg)  # validation, before any model loads: fetches, then checks every file the run reads
    err = capsys.readouterr().err
    assert f"first use: fetching wiki1m, senteval into {first_use}" in err
    assert ("/hub/wiki1m_for_simcse.txt", "bytes=2000000-") in server.requests
    assert (first_use / "corpus/wiki1m_for_simcse.txt").read_bytes() == corpus
    assert dl.read_record(first_use)["files"]["corpus/wiki1m_for_simcse.txt"]["sha256"] == hashlib.sha256(corpus).hexdigest()
    assert dl.verify(first_use, ["senteval", "wiki1m"]).ok
    # the second run fetches nothing (presence only: no hashing at every start)
    requests = len(server.requests)
    preflight(_main_job(tiny_bert))
    assert len(server.requests) == requests and "fetching" not in capsys.readouterr().err


def test_main_job_offline_fails_at_once_with_one_line(
    tiny_bert: Path, first_use: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cl_bench.config import ConfigError, preflight

    dead = f"http://127.0.0.1:{_closed_port()}"
    for source in ("SENTEVAL", "WIKI1M"):
        monkeypatch.setenv(f"CL_BENCH_URL_{source}", dead)
    cfg = _main_job(tiny_bert)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        preflight(cfg)
    assert time.perf_counter() - start < 5  # one probe: no retries, no waiting on the network
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"data.train_file: data root '{first_use}' not found and 127.0.0.1:")
    assert f"`cl-bench-data download --only wiki1m senteval --data-dir {first_use}`" in message
    assert "data=wiki1m_head" in message
    assert not first_use.exists()
    # evaluation only needs SentEval's data: the message names it and the data-root alternative
    first_use.mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"^paths.data_dir: sts/STS12-en-test/STS.input.MSRpar.txt \(and \d+ more files\) is not in the data root .* cannot be reached: "
                                          r"fetch it with `cl-bench-data download --only senteval"):
        preflight(_main_job(tiny_bert, "mode=eval"))
    # HF_HUB_OFFLINE (set by the tests) turns first-use downloads off without any probe
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"downloads are off \(HF_HUB_OFFLINE=1\)"):
        preflight(_main_job(tiny_bert, "mode=eval"))


def test_fetch_goes_through_pooch_with_the_range_downloader(
    server: _Server, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pooch

    files = _serve_wikitext(server, data_dir)
    calls: list[tuple[str, str | None, object]] = []
    real = pooch.retrieve

    def spy(url: str, known_hash: str | None, **kwargs: object) -> str:
        calls.append((url, known_hash, kwargs["downloader"]))
        return real(url, known_hash, **kwargs)

    monkeypatch.setattr(pooch, "retrieve", spy)
    server.cut_once["/wt2/README"] = 100
    dest = tmp_path / "README"
    sha = hashlib.sha256(files["README"]).hexdigest()
    assert dl.fetch(f"{server.base}/wt2/README", dest, sha, progress=False) == sha
    ((url, known, downloader),) = calls
    assert known == f"sha256:{sha}" and isinstance(downloader, dl.RangeDownloader)
    assert [r for p, r in server.requests if p == "/wt2/README"] == [None, "bytes=100-"]
    assert dest.read_bytes() == files["README"] and not list(tmp_path.glob("*.part"))
