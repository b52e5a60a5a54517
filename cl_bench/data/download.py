"""``cl-bench-data``: fetch, verify and list every dataset cl-bench uses, in one data root.

    cl-bench-data download [--only senteval wiki1m] [--data-dir DIR]   # fetch, extract, verify
    cl-bench-data verify [--data-dir DIR]                               # checksums + STS pair counts
    cl-bench-data list [--data-dir DIR]                                 # what is there

The data root (``paths.data_dir``; default ``$CL_BENCH_DATA``, else ``~/.cache/cl-bench/data``) holds SentEval's
STS sets under ``sts/``, the transfer sets under ``transfer/``, training corpora under ``corpus/``
and NLI data under ``nli/``. What each source is, where it comes from, which files it yields and
their SHA-256 checksums is recorded in ``manifest.json`` beside this module.

Fetching, hash checks and archive extraction go through `pooch <https://www.fatiando.org/pooch>`_
(``pooch.retrieve`` with ``known_hash``; ``pooch.Untar``/``pooch.Unzip``). pooch has no resume of a
cut download, so its documented custom-downloader hook gets
:class:`cl_bench.data.fetch.RangeDownloader`: the bytes go to ``<file>.part`` and a cut connection
continues with an HTTP ``Range`` request, with a tqdm progress bar. What stays here is specific to cl-bench: the manifest, the data-root layout, the
derived files (SNLI triples, wiki1m head), the offline rules and ``verify``/``list``. Where no published checksum
exists (``sha256: null``: SimCSE's ``senteval.tar``, ``wiki1m_for_simcse.txt``,
``nli_for_simcse.csv``) the first successful download records the measured one in
``<root>/.cl_bench_data.json`` and ``verify`` says that it compares against that local record.

Offline (DNS failure, connection refused), ``download`` stops at once and says where to put each
file by hand: a file already at that place is used without any network access.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import gzip
import io
import json
import os
import shutil
import sys
import tarfile
import urllib.parse
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

import pooch
from filelock import FileLock

from cl_bench.data.fetch import (  # noqa: F401 (re-exported: cl-bench-data's API)
    CHUNK,
    ChecksumError,
    DataDownloadError,
    DataUsageError,
    OfflineError,
    RangeDownloader,
    fetch,
    sha256_file,
)
from cl_bench.data.fetch import quiet_pooch as _quiet_pooch
from cl_bench.data.text import DataFileError
from cl_bench.utils.arguments import OneLineParser, int_at_least, positive_float
from cl_bench.utils.cache_dirs import default_data_dir
from cl_bench.utils.network import host_reachable

MANIFEST_PATH = Path(__file__).with_name("manifest.json")
#: Per-root record of checksums measured at download time (for files without a published one).
RECORD_FILE = ".cl_bench_data.json"
#: Archives and parts are downloaded here; a file placed here by hand is used as is.
DOWNLOADS_DIR = ".downloads"
#: Held while a run fetches missing data on first use.
DOWNLOAD_LOCK = ".cl_bench_download.lock"

# ------------------------------------------------------------------------------------------------
# Manifest, paths, checksums
# ------------------------------------------------------------------------------------------------
def load_manifest(path: str | Path | None = None) -> dict[str, Any]:
    """Read the dataset manifest (sources, files with checksums, STS pair counts).

    Args:
        path: a manifest JSON file; None = the one shipped with cl-bench.

    Returns:
        The parsed manifest.
    """
    return json.loads(Path(path or MANIFEST_PATH).read_text(encoding="utf-8"))


def count_lines(path: Path) -> int:
    """Lines of a text file (``.gz`` transparently), counting an unterminated last line."""
    opener = gzip.open if path.suffix == ".gz" else open
    count, last = 0, b"\n"
    with opener(path, "rb") as fh:
        while block := fh.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def _count_csv_rows(path: Path) -> int:
    """Data rows of a CSV with a header row (quoted fields may hold newlines)."""
    with open(path, encoding="utf-8", newline="") as fh:
        return max(sum(1 for _ in csv.reader(fh)) - 1, 0)


def read_record(root: Path) -> dict[str, Any]:
    """The root's record of checksums measured at download time (empty when none)."""
    path = root / RECORD_FILE
    found = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return {"files": {}, "downloads": {}, **found}


def _write_record(root: Path, record: dict[str, Any]) -> None:
    tmp = root / (RECORD_FILE + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(root / RECORD_FILE)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class FileCheck:
    """Result of checking one file of the data root against the manifest."""

    path: str
    state: str  # ok | missing | corrupt | unverified
    detail: str = ""
    optional: bool = False


def check_file(root: Path, rel: str, entry: dict[str, Any], record: dict[str, Any]) -> FileCheck:
    """Check one file: present, right checksum (or the one recorded at download), right size.

    ``.gz`` files also pass when their *content* matches (a re-compressed copy has other bytes).
    Files without a published checksum are compared with the local download record, and their
    line/row count with the manifest's.
    """
    path = root / rel
    optional = bool(entry.get("optional"))
    if not path.is_file():
        return FileCheck(rel, "missing", "not found", optional)
    expected = entry.get("sha256")
    size = path.stat().st_size
    if expected:
        digest = sha256_file(path)
        if digest == expected:
            return FileCheck(rel, "ok", "sha256", optional)
        if digest in entry.get("alt_sha256", []):
            return FileCheck(rel, "ok", "sha256 (alternative form: " + entry.get("note", "") + ")", optional)
        if path.suffix == ".gz" and entry.get("content_sha256"):
            try:
                if sha256_file(path, decompress=True) == entry["content_sha256"]:
                    return FileCheck(rel, "ok", "sha256 of gunzipped content", optional)
            except (OSError, EOFError, gzip.BadGzipFile):
                pass
        want = entry.get("bytes")
        how = f"{size} bytes, expected {want}" if want is not None and want != size else f"{size} bytes"
        return FileCheck(rel, "corrupt", f"{how}; sha256 {digest[:16]}… differs from {expected[:16]}…", optional)
    # No published checksum: size/line sanity, then the record made at download time.
    if "lines" in entry:
        lines = count_lines(path)
        if lines != entry["lines"]:
            return FileCheck(rel, "corrupt", f"{lines} lines, expected {entry['lines']} (truncated?)", optional)
    if "rows" in entry:
        rows = _count_csv_rows(path)
        if rows != entry["rows"]:
            return FileCheck(rel, "corrupt", f"{rows} CSV rows, expected {entry['rows']} (truncated?)", optional)
    recorded = record["files"].get(rel)
    if recorded:
        digest = sha256_file(path)
        if digest != recorded["sha256"]:
            return FileCheck(
                rel, "corrupt", f"sha256 {digest[:16]}… differs from the one recorded at download "
                f"({recorded['sha256'][:16]}…, {recorded.get('date', '?')})", optional
            )
        return FileCheck(
            rel, "ok", f"sha256 matches the one recorded at download on {recorded.get('date', '?')} "
            "(no published checksum)", optional
        )
    return FileCheck(
        rel, "unverified", "present; not verified yet: no published checksum and not downloaded by "
        "cl-bench-data (the checksum is recorded on first successful download)", optional
    )


# ------------------------------------------------------------------------------------------------
# Archives and build steps
# ------------------------------------------------------------------------------------------------
def map_member(name: str, rules: Sequence[dict[str, Any]]) -> tuple[str, bool] | None:
    """Where an archive member goes in the data root, by SentEval folder name.

    The rules match the first path component that is a SentEval task folder (``STS/``, ``SICK/``,
    ``MR/`` …), whatever prefix the archive puts before it (``downstream/``, ``SentEval/data/…``).

    Returns:
        ``(root-relative path, gzip it)``, or None for members cl-bench does not use.
    """
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts or "__MACOSX" in parts:
        return None
    if parts[-1].startswith("._"):  # macOS resource forks
        return None
    for i in range(len(parts) - 1):
        tail = "/".join(parts[i:])
        for rule in rules:
            if tail.startswith(rule["from"]):
                target = rule["to"] + tail[len(rule["from"]) :]
                gz = bool(rule.get("gzip")) and not target.endswith(".gz")
                return (target + ".gz" if gz else target), gz
    return None


def _write_stream(src: IO[bytes], target: Path, gzip_it: bool) -> None:
    """Write a stream atomically (``.part`` + rename); gzip deterministically (mtime 0, no name)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    with open(tmp, "wb") as raw:
        if gzip_it:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                shutil.copyfileobj(src, gz, CHUNK)
        else:
            shutil.copyfileobj(src, raw, CHUNK)
    tmp.replace(target)


def _archive_members(archive: Path) -> tuple[type[pooch.Untar] | type[pooch.Unzip], list[str]]:
    """pooch's extractor for the archive and its regular-file member names."""
    try:
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive, "r:*") as tar:
                return pooch.Untar, [m.name for m in tar if m.isfile()]
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                return pooch.Unzip, [i.filename for i in zf.infolist() if not i.is_dir()]
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, gzip.BadGzipFile) as err:
        raise DataDownloadError(f"{archive}: damaged archive ({err}); delete it and download again") from err
    raise DataDownloadError(f"{archive}: not a tar or zip archive; delete it and download again")


def extract_archive(archive: Path, root: Path, rules: Sequence[dict[str, Any]]) -> list[str]:
    """Extract a tar (plain, .gz, .bz2, .xz) or zip archive into the data root's layout.

    pooch's ``Untar``/``Unzip`` extract only the members :func:`map_member` places (so nothing
    outside ``root`` is ever written: ``..`` and absolute names are not placed) into a scratch
    folder under ``<root>/.downloads``; each is then moved (or gzipped) to its place.

    Returns:
        Root-relative paths written.

    Raises:
        DataDownloadError: not a tar or zip archive, or it is damaged.
    """
    extractor, names = _archive_members(archive)
    placed = {name: where for name in names if (where := map_member(name, rules))}
    scratch = root / DOWNLOADS_DIR / (archive.name + ".extract")
    shutil.rmtree(scratch, ignore_errors=True)
    written: list[str] = []
    try:
        with _quiet_pooch():
            extractor(members=list(placed), extract_dir=str(scratch.resolve()))(str(archive), "download", None)
        for name, (rel, gzip_it) in placed.items():
            src = scratch / name
            if gzip_it:
                with open(src, "rb") as fh:
                    _write_stream(fh, root / rel, gzip_it=True)
            else:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, root / rel)
            written.append(rel)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise DataDownloadError(f"{archive}: damaged archive ({err}); delete it and download again") from err
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return written


def build_head_lines(src: Path, dest: Path, lines: int) -> None:
    """Write the first ``lines`` lines of ``src`` to ``dest`` (e.g. the wiki1m head)."""
    with open(src, "rb") as fh:
        head = b"".join(line for _, line in zip(range(lines), fh, strict=False))
    _write_stream(io.BytesIO(head), dest, gzip_it=False)


def build_snli_triples(input_dir: Path, splits: Sequence[str], dest: Path) -> int:
    """SimCSE-style ``sent0,sent1,hard_neg`` triples from SentEval's SNLI files.

    For each premise (first occurrence order), its entailment hypotheses are paired in order with
    its contradiction hypotheses (``zip``), as SimCSE built ``nli_for_simcse.csv``.

    Returns:
        Number of triples written.
    """
    rows: list[tuple[str, str, str]] = []
    for split in splits:
        columns = []
        for stem in ("s1", "s2", "labels"):
            path = input_dir / f"{stem}.{split}.gz"
            if not path.is_file():
                raise DataDownloadError(f"{path}: missing; run `cl-bench-data download --only senteval` first")
            with gzip.open(path, "rt", encoding="utf-8", newline="\n") as fh:
                columns.append(fh.read().split("\n")[:-1])
        premises, hypotheses, labels = columns
        if not len(premises) == len(hypotheses) == len(labels):
            raise DataDownloadError(f"{input_dir}: s1/s2/labels.{split} have different line counts")
        groups: dict[str, dict[str, list[str]]] = {}
        for premise, hypothesis, label in zip(premises, hypotheses, labels, strict=True):
            group = groups.setdefault(premise.strip(), {"entailment": [], "contradiction": []})
            if label.strip() in group:
                group[label.strip()].append(hypothesis.strip())
        for premise, group in groups.items():
            rows.extend((premise, e, c) for e, c in zip(group["entailment"], group["contradiction"], strict=False))
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["sent0", "sent1", "hard_neg"])
    writer.writerows(rows)
    _write_stream(io.BytesIO(text.getvalue().encode("utf-8")), dest, gzip_it=True)
    return len(rows)


# ------------------------------------------------------------------------------------------------
# Sources
# ------------------------------------------------------------------------------------------------
def source_base_url(source: dict[str, Any], overrides: dict[str, str] | None = None) -> str:
    """Base URL of a source: ``--url NAME=URL``, else ``$CL_BENCH_URL_<NAME>``, else the manifest's."""
    name = source["name"]
    env = os.environ.get("CL_BENCH_URL_" + name.upper())
    return ((overrides or {}).get(name) or env or source["base_url"]).rstrip("/")


def _manual_places(source: dict[str, Any], root: Path, overrides: dict[str, str] | None) -> list[str]:
    """Lines saying where each file of a source can be put by hand."""
    kind = source["kind"]
    if kind == "local":
        return [f"{source['how']}: {', '.join(str(root / y) for y in source['yields'])}"]
    if kind == "derived":
        return [f"built from {', '.join(source.get('needs', []))}: get that first"]
    base = source_base_url(source, overrides)
    downloads = source["downloads"]
    if kind == "file":
        return [f"{base}/{d['remote']}  ->  {root / d['target']}" for d in downloads]
    if kind == "archive":
        return [
            f"{base}/{d['remote']}  ->  {root / DOWNLOADS_DIR / d['remote']}  (extracted on the next download), "
            f"or copy its files from another data root" for d in downloads
        ]
    first, last = downloads[0]["remote"], downloads[-1]["remote"]
    return [f"{base}/{first} … {last} ({len(downloads)} files)  ->  {root / DOWNLOADS_DIR / source['name']}/"]


def _yields_ok(root: Path, source: dict[str, Any], manifest: dict[str, Any], record: dict[str, Any]) -> bool:
    files = manifest["files"]
    for rel in source["yields"]:
        entry = files.get(rel, {})
        if entry.get("optional") and not (root / rel).exists():
            continue
        if check_file(root, rel, entry, record).state not in ("ok",):
            return False
    return True


def _select(manifest: dict[str, Any], only: Iterable[str] | None) -> list[dict[str, Any]]:
    sources = manifest["sources"]
    if not only:
        return list(sources)
    names = {s["name"] for s in sources}
    wanted = list(dict.fromkeys(only))
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise DataUsageError(f"--only: unknown source '{unknown[0]}'; valid: {', '.join(sorted(names))}")
    return [s for s in sources if s["name"] in wanted]


@dataclass
class _Context:
    root: Path
    manifest: dict[str, Any]
    record: dict[str, Any]
    overrides: dict[str, str]
    retries: int
    progress: bool
    keep_downloads: bool
    log: Callable[[str], None]
    timeout: float = 30.0

    def remember(self, rel: str, digest: str, url: str) -> None:
        """Record a checksum measured at download for a file without a published one."""
        self.record["files"][rel] = {"sha256": digest, "date": _now(), "url": url}
        _write_record(self.root, self.record)


def _check_outputs(ctx: _Context, source: dict[str, Any], paths: Iterable[str]) -> None:
    """Verify what a source wrote; corrupt files are removed and named."""
    bad = []
    for rel in paths:
        entry = ctx.manifest["files"].get(rel)
        if entry is None or not entry.get("sha256"):
            continue
        result = check_file(ctx.root, rel, entry, ctx.record)
        if result.state != "ok":
            (ctx.root / rel).unlink(missing_ok=True)
            bad.append(f"{rel} ({result.detail})")
    if bad:
        raise ChecksumError(
            f"{source['name']}: {len(bad)} file(s) failed their checksum and were removed: " + "; ".join(bad)
        )


def _download_file_source(ctx: _Context, source: dict[str, Any]) -> None:
    base = source_base_url(source, ctx.overrides)
    for item in source["downloads"]:
        rel, url = item["target"], f"{base}/{item['remote']}"
        target = ctx.root / rel
        if target.is_file():  # downloaded before, or put here by hand: check it before any network use
            result = check_file(ctx.root, rel, ctx.manifest["files"].get(rel, {}), ctx.record)
            if result.state == "ok":
                continue
            if result.state == "unverified":
                ctx.remember(rel, sha256_file(target), "placed by hand")
                ctx.log(f"  {rel}: present (no published checksum; recorded its sha256)")
                continue
            target.unlink()
            ctx.log(f"  {rel}: {result.detail}; removed, downloading again")
        ctx.log(f"  {url}")
        digest = fetch(url, target, item.get("sha256"), ctx.retries, ctx.timeout, ctx.progress)
        entry = ctx.manifest["files"].get(rel, {})
        if not item.get("sha256"):
            result = check_file(ctx.root, rel, {**entry, "optional": False}, {"files": {}})
            if result.state == "corrupt":
                target.unlink()
                raise ChecksumError(f"{rel}: {result.detail}; removed — run the download again")
            ctx.remember(rel, digest, url)
    _check_outputs(ctx, source, source["yields"])


def _download_archive_source(ctx: _Context, source: dict[str, Any]) -> None:
    base = source_base_url(source, ctx.overrides)
    written: list[str] = []
    for item in source["downloads"]:
        archive = ctx.root / DOWNLOADS_DIR / item["remote"]
        url = f"{base}/{item['remote']}"
        if archive.is_file():
            ctx.log(f"  using {archive}")
            digest = sha256_file(archive)
            if item.get("sha256") and digest != item["sha256"]:
                archive.unlink()
                raise ChecksumError(f"{archive}: checksum mismatch (removed); run the download again")
        else:
            ctx.log(f"  {url}")
            digest = fetch(url, archive, item.get("sha256"), ctx.retries, ctx.timeout, ctx.progress)
        ctx.record["downloads"][item["remote"]] = {"sha256": digest, "date": _now(), "url": url}
        _write_record(ctx.root, ctx.record)
        ctx.log(f"  extracting {archive.name}")
        written += extract_archive(archive, ctx.root, source["extract"])
        if not ctx.keep_downloads:
            archive.unlink()
    missing = _absent(ctx.root, source, ctx.manifest)
    _check_outputs(ctx, source, written)
    if missing:
        raise DataDownloadError(
            f"{source['name']}: the archive lacks {len(missing)} expected file(s), e.g. {missing[0]}"
        )


def _download_concat_source(ctx: _Context, source: dict[str, Any]) -> None:
    base = source_base_url(source, ctx.overrides)
    parts_dir = ctx.root / DOWNLOADS_DIR / source["name"]
    parts = []
    for item in source["downloads"]:
        part = parts_dir / item["remote"]
        if not part.is_file():
            fetch(f"{base}/{item['remote']}", part, item.get("sha256"), ctx.retries, ctx.timeout, ctx.progress)
        parts.append(part)
    target = ctx.root / source["target"]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, gz, CHUNK)
    tmp.replace(target)
    _check_outputs(ctx, source, [source["target"]])
    if not ctx.keep_downloads:
        shutil.rmtree(parts_dir)


def _build_derived_source(ctx: _Context, source: dict[str, Any]) -> None:
    build = source["build"]
    (target,) = source["yields"]
    if build["step"] == "head_lines":
        src = ctx.root / build["input"]
        if not src.is_file():
            raise DataDownloadError(f"{src}: missing; run `cl-bench-data download --only {source['needs'][0]}` first")
        build_head_lines(src, ctx.root / target, int(build["lines"]))
    elif build["step"] == "snli_triples":
        build_snli_triples(ctx.root / build["input_dir"], build["splits"], ctx.root / target)
    else:
        raise DataDownloadError(f"manifest: source {source['name']}: unknown build step '{build['step']}'")
    _check_outputs(ctx, source, [target])


#: how each kind of manifest source is fetched or built
_FETCHERS: dict[str, Callable[[_Context, dict[str, Any]], None]] = {
    "file": _download_file_source,
    "archive": _download_archive_source,
    "concat_gzip": _download_concat_source,
    "derived": _build_derived_source,
}


def download(
    root: str | Path,
    only: Iterable[str] | None = None,
    force: bool = False,
    url_overrides: dict[str, str] | None = None,
    retries: int = 3,
    progress: bool = True,
    keep_downloads: bool = False,
    timeout: float = 30.0,
    log: Callable[[str], None] = print,
    manifest: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Fetch, extract, build and verify the selected sources into the data root.

    Args:
        root: the data root (created if needed).
        only: source names (default: every source in the manifest).
        force: fetch again even when the files are present and verified.
        url_overrides: ``{source name: base URL}`` (e.g. a local mirror).
        retries: resume attempts per file after a cut connection.
        progress: tqdm progress bars on stderr.
        keep_downloads: keep archives and parts under ``<root>/.downloads``.
        timeout: socket timeout in seconds.
        log: where progress lines go.
        manifest: a manifest dict (default: the shipped one).

    Returns:
        ``{source name: "present" | "downloaded" | "built" | "not available"}``.

    Raises:
        OfflineError: a host cannot be reached; the message says where to put files by hand.
        ChecksumError, DataDownloadError: with the file and the fix.
    """
    root = Path(root)
    manifest = manifest or load_manifest()
    selected = _select(manifest, only)  # an unknown --only first: a rejected command creates no data root
    root.mkdir(parents=True, exist_ok=True)
    ctx = _Context(
        root, manifest, read_record(root), dict(url_overrides or {}), retries, progress, keep_downloads, log, timeout
    )
    status: dict[str, str] = {}
    for index, source in enumerate(selected):
        name = source["name"]
        if not force and _yields_ok(root, source, manifest, ctx.record):
            log(f"{name}: present and verified")
            status[name] = "present"
            continue
        if source["kind"] == "local":
            log(f"{name}: not available for download — {source['how']}")
            status[name] = "not available"
            continue
        log(f"{name}: {source['description']}")
        try:
            if source["kind"] not in _FETCHERS:
                raise DataDownloadError(f"manifest: source {name}: unknown kind '{source['kind']}'")
            _FETCHERS[source["kind"]](ctx, source)
        except OfflineError as err:
            pending = [s for s in selected[index:] if not _yields_ok(root, s, manifest, ctx.record)]
            places = [f"  {s['name']}: {line}" for s in pending for line in _manual_places(s, root, ctx.overrides)]
            raise OfflineError(
                f"{err}. Offline? Put the files by hand, then run `cl-bench-data download --data-dir {root}` "
                "again (files already in place are checked and used without network):\n" + "\n".join(places)
            ) from err
        status[name] = "built" if source["kind"] == "derived" else "downloaded"
        log(f"{name}: done")
    return status


# ------------------------------------------------------------------------------------------------
# First use: fetch what a run needs
# ------------------------------------------------------------------------------------------------
#: Set to 1 to never fetch data on first use (also implied by HF_HUB_OFFLINE: the sources are on the hub).
DATA_OFFLINE_ENV = "CL_BENCH_DATA_OFFLINE"


def source_of(rel: str, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The source whose files include the root-relative path ``rel`` (None: no source ships it)."""
    return next((s for s in manifest["sources"] if rel in s["yields"]), None)


def _absent(root: Path, source: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    """The source's required files that are not in the root (presence only: no hashing on every run)."""
    files = manifest["files"]
    return [rel for rel in source["yields"] if not files.get(rel, {}).get("optional") and not (root / rel).is_file()]


def _with_needs(names: Iterable[str], manifest: dict[str, Any]) -> list[str]:
    """The sources and, for derived ones, the sources they are built from (download skips present ones)."""
    by_name = {s["name"]: s for s in manifest["sources"]}
    out: list[str] = []
    for name in names:
        out += [*_with_needs(by_name[name].get("needs", []), manifest), name]
    return list(dict.fromkeys(out))


def downloads_switched_off() -> str | None:
    """The environment variable that turns first-use downloads off, if one is set."""
    return next((var for var in (DATA_OFFLINE_ENV, "HF_HUB_OFFLINE")
                 if os.environ.get(var, "0").lower() not in ("0", "", "false")), None)


def _offline_advice(key: str, tried: Collection[str]) -> str:
    """What to do offline about a missing file of ``key``, leaving out what the user already did."""
    root_advice = ("point paths.data_dir at another data root that has it" if "paths.data_dir" in tried
                   else "set CL_BENCH_DATA (or paths.data_dir) to a data root that has it"
                   if "CL_BENCH_DATA" not in tried else "point CL_BENCH_DATA (or paths.data_dir) at another data root that has it")
    if key != "data.train_file":
        return root_advice
    corpus = [] if "data=wiki1m_head" in tried else ["data=wiki1m_head (in a data root that has it)"]
    corpus += [] if "data.train_file" in tried else ["data.train_file=FILE"]
    return f"train on a corpus you have: {' or '.join(corpus)}" if corpus else root_advice


def ensure_data(
    root: str | Path,
    wanted: Sequence[tuple[str, str]],
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    progress: bool = True,
    manifest: dict[str, Any] | None = None,
    tried: Collection[str] = (),
) -> list[str]:
    """Fetch the data files a run reads that are missing from the data root (the main job's first use).

    Runs before any model loads. The sources that ship the missing files are fetched with
    :func:`download` (progress bar, checksums, resume from ``.part`` files) when their hosts answer
    a quick probe; offline (``CL_BENCH_DATA_OFFLINE=1``, ``HF_HUB_OFFLINE=1`` or no answer) nothing
    waits on the network. A file no source ships (a corpus of your own) is left to the caller's checks.

    Args:
        root: the data root (``paths.data_dir``).
        wanted: ``(config key, file relative to the root)`` pairs, e.g.
            ``("data.train_file", "corpus/wiki1m_for_simcse.txt")``.
        log: where progress lines go (stderr).
        progress: tqdm progress bars.
        manifest: a manifest dict (default: the shipped one).
        tried: what the user already did (``data=wiki1m_head``, ``data.train_file``, ``CL_BENCH_DATA``):
            the offline advice does not suggest it again.

    Returns:
        The sources fetched or built (empty when every file was there).

    Raises:
        DataDownloadError: one line starting with the config key: the missing file, the
            ``cl-bench-data download --only …`` command, and what to do offline.
    """
    root = Path(root)
    manifest = manifest or load_manifest()
    missing = [(key, rel, source) for key, rel in dict.fromkeys(wanted)
               if not (root / rel).is_file() and (source := source_of(rel, manifest)) is not None]
    if not missing:
        return []
    by_name = {s["name"]: s for s in manifest["sources"]}
    names = _with_needs(dict.fromkeys(source["name"] for _, _, source in missing), manifest)
    command = f"`cl-bench-data download --only {' '.join(names)} --data-dir {root}`"
    key, rel, source = missing[0]
    if source["kind"] == "local":
        raise DataDownloadError(f"{key}: {rel} is not in the data root {root}; {source['how']}")
    fetched = [by_name[n] for n in names if by_name[n]["kind"] != "derived" and _absent(root, by_name[n], manifest)]
    hosts = {urllib.parse.urlsplit(source_base_url(s)).netloc: source_base_url(s) for s in fetched}
    switch = downloads_switched_off()
    unreachable = f"downloads are off ({switch}=1)" if switch else next(
        (f"{host} cannot be reached" for host, url in hosts.items() if not host_reachable(url)), None)
    if unreachable:
        more = f" (and {len(missing) - 1} more files)" if len(missing) > 1 else ""
        where = f"data root '{root}' not found" if not root.is_dir() else f"{rel}{more} is not in the data root {root}"
        offline_use = _offline_advice(key, tried)
        raise DataDownloadError(f"{key}: {where} and {unreachable}: fetch it with {command} on a connected "
                                f"machine, or offline {offline_use}")
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root / DOWNLOAD_LOCK):  # the jobs of a parallel sweep fetch once, not side by side
        if all((root / rel).is_file() for _, rel, _ in missing):
            return []  # another job fetched it meanwhile
        log(f"cl-bench: first use: fetching {', '.join(names)} into {root} (as {command} does)")
        try:
            done = download(root, names, progress=progress, log=log, manifest=manifest)
        except DataDownloadError as err:
            raise DataDownloadError(f"{key}: {str(err).splitlines()[0]}") from err
    return [name for name, state in done.items() if state in ("downloaded", "built")]


# ------------------------------------------------------------------------------------------------
# verify / list
# ------------------------------------------------------------------------------------------------
def count_sts_pairs(root: Path, manifest: dict[str, Any]) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Scored pairs per STS set and subset/split, read with cl-bench's own SentEval readers.

    Counting with the evaluation's readers means the counts are the pairs evaluation will score
    (STS12-16 drop unscored pairs; SICK's header row is skipped).

    Returns:
        ``({set: {subset or split: pairs}}, [unreadable file messages])``; an unreadable subset
        or split is left out of the counts.
    """
    # numpy: the checks before a model loads read the manifest through this module (config.check_model_and_files)
    from cl_bench.data.senteval import read_sick_split, read_sts_subset, read_stsb_split

    counts: dict[str, dict[str, int]] = {}
    errors: list[str] = []
    for name, spec in manifest["sts_pairs"].items():
        folder = root / spec["dir"]
        found: dict[str, int] = {}
        for part in spec.get("subsets") or spec["splits"]:
            try:
                if "subsets" in spec:
                    found[part] = len(read_sts_subset(folder, part))
                elif name == "STSBenchmark":
                    found[part] = len(read_stsb_split(folder / f"sts-{part}.csv"))
                else:
                    found[part] = len(read_sick_split(folder / f"SICK_{part}.txt"))
            except DataFileError as err:
                errors.append(str(err))
        counts[name] = found
    return counts, errors


@dataclass
class VerifyReport:
    """Outcome of :func:`verify`: ``ok`` is False when required data is missing or anything is corrupt."""

    ok: bool
    lines: list[str]
    problems: list[str]
    sts_pairs: dict[str, dict[str, int]]
    checks: dict[str, list[FileCheck]]


def _fix(source: dict[str, Any], root: Path) -> str:
    if source["kind"] == "local":
        return source["how"]
    return f"run `cl-bench-data download --only {source['name']} --data-dir {root}`"


def verify(root: str | Path, only: Iterable[str] | None = None, manifest: dict[str, Any] | None = None) -> VerifyReport:
    """Check a data root: every file present, checksums, and STS pair counts.

    Required sources (SentEval) must be complete; other sources are reported as missing when
    absent and checked when present. Every problem names the file and the command that fixes it.
    """
    root = Path(root)
    manifest = manifest or load_manifest()
    record = read_record(root)
    lines = [f"data root: {root.resolve()}"]
    problems: list[str] = []
    checks: dict[str, list[FileCheck]] = {}
    for source in _select(manifest, only):
        name = source["name"]
        results = [check_file(root, rel, manifest["files"].get(rel, {}), record) for rel in source["yields"]]
        checks[name] = results
        needed = [r for r in results if not r.optional]
        present = [r for r in needed if r.state != "missing"]
        corrupt = [r for r in results if r.state == "corrupt"]
        unverified = [r for r in results if r.state == "unverified"]
        missing = [r for r in needed if r.state == "missing"]
        fix = _fix(source, root)
        if not present and not corrupt:
            if source.get("required"):
                problems.append(f"{name}: missing ({len(missing)} files, e.g. {missing[0].path}) — fix: {fix}")
                lines.append(f"MISSING   {name}: {len(missing)} required files absent — fix: {fix}")
            else:
                lines.append(f"absent    {name} (optional) — get it: {fix}")
            continue
        problems += [f"{r.path}: corrupt ({r.detail}) — fix: {fix}" for r in corrupt]
        problems += [f"{r.path}: missing — fix: {fix}" for r in missing]
        lines += [f"CORRUPT   {r.path}: {r.detail} — fix: {fix}" for r in corrupt]
        lines += [f"MISSING   {r.path} — fix: {fix}" for r in missing]
        lines += [f"unverified {r.path}: {r.detail}" for r in unverified]
        if not corrupt and not missing:
            verified = sum(r.state == "ok" for r in results)
            lines.append(f"ok        {name}: {verified}/{len(results)} files verified")
    pairs: dict[str, dict[str, int]] = {}
    if only is None or "senteval" in only:
        pairs, unreadable = count_sts_pairs(root, manifest)
        # missing files are already reported above; say why a present file could not be read
        lines += [f"UNREADABLE {message}" for message in unreadable if not message.endswith("file not found")]
        for name, spec in manifest["sts_pairs"].items():
            expected = spec.get("subsets") or spec["splits"]
            got = pairs[name]
            if got == expected:
                total = spec.get("total")
                detail = f"{total} scored pairs" if total else "/".join(str(got[k]) for k in expected) + " pairs"
                lines.append(f"pairs     {name}: {detail} ({', '.join(f'{k} {v}' for k, v in got.items())})")
            else:
                wrong = [f"{k} {got.get(k, 'missing')} (expected {v})" for k, v in expected.items() if got.get(k) != v]
                problems.append(f"{name}: pair counts differ: {', '.join(wrong)} — fix: run "
                                f"`cl-bench-data download --only senteval --data-dir {root}`")
                lines.append(f"PAIRS     {name}: {', '.join(wrong)}")
    ok = not problems
    lines.append("verify: OK" if ok else f"verify: {len(problems)} problem(s)")
    return VerifyReport(ok, lines, problems, pairs, checks)


def list_sources(root: str | Path, manifest: dict[str, Any] | None = None) -> list[str]:
    """One line per source: present files, size on disk, description (no hashing)."""
    root = Path(root)
    manifest = manifest or load_manifest()
    out = [f"data root: {root.resolve()}"]
    for source in manifest["sources"]:
        needed = [root / rel for rel in source["yields"] if not manifest["files"].get(rel, {}).get("optional")]
        present = [root / rel for rel in source["yields"] if (root / rel).is_file()]
        size = sum(p.stat().st_size for p in present)
        have_needed = sum(p.is_file() for p in needed)
        state = "complete" if have_needed == len(needed) else ("partial" if present else "absent")
        tag = "required" if source.get("required") else "optional"
        out.append(
            f"{source['name']:<22} {state:<9} {len(present):>3}/{len(source['yields']):<3} files {size / 1e6:8.1f} MB  "
            f"[{tag}] {source['description']}"
        )
    return out


# ------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------
def _parse_overrides(values: Sequence[str]) -> dict[str, str]:
    overrides = {}
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or not name or not url:
            raise DataUsageError(f"--url: expected NAME=URL, got '{value}'")
        overrides[name] = url
    return overrides


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of ``cl-bench-data``."""
    common = OneLineParser(add_help=False)
    common.add_argument(
        "--data-dir", type=Path, default=None,
        help="data root (default: $CL_BENCH_DATA, else ~/.cache/cl-bench/data)",
    )
    common.add_argument("--only", nargs="+", metavar="SOURCE", help="only these sources (see `list`)")
    parser = OneLineParser(
        prog="cl-bench-data", description="Fetch, verify and list the datasets cl-bench uses."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    dl = sub.add_parser("download", parents=[common], help="fetch, extract and verify datasets")
    dl.add_argument("--force", action="store_true", help="fetch again even if present and verified")
    dl.add_argument(
        "--url", action="append", default=[], metavar="SOURCE=URL",
        help="base URL for a source (also $CL_BENCH_URL_<SOURCE>), e.g. a local mirror",
    )
    dl.add_argument("--retries", type=int_at_least(0), default=3, help="resume attempts after a cut connection")
    dl.add_argument("--timeout", type=positive_float, default=30.0, help="socket timeout in seconds")
    dl.add_argument("--keep-downloads", action="store_true", help=f"keep archives in <root>/{DOWNLOADS_DIR}")
    dl.add_argument("--no-progress", action="store_true", help="no progress bars")
    sub.add_parser("verify", parents=[common], help="check files, checksums and STS pair counts")
    sub.add_parser("list", parents=[common], help="show which datasets are present")
    # numpy: the mine subcommand's module; the checks before a model loads import this one
    from cl_bench.data.mine import add_parser as add_mine_parser

    add_mine_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit status (0 ok, 1 problem, 2 usage)."""
    args = build_parser().parse_args(argv)
    if args.command == "mine":
        from cl_bench.data.mine import run as run_mine

        return run_mine(args)
    root = args.data_dir or default_data_dir()
    try:
        if args.command == "download":  # then verify what it fetched
            download(
                root, args.only, args.force, _parse_overrides(args.url), args.retries,
                progress=not args.no_progress, keep_downloads=args.keep_downloads, timeout=args.timeout,
            )
        if args.command in ("download", "verify"):
            report = verify(root, args.only)
            print("\n".join(report.lines))
            return 0 if report.ok else 1
        print("\n".join(list_sources(root)))
        return 0
    except DataDownloadError as err:
        print(f"cl-bench-data: error: {err}", file=sys.stderr)
        return 2 if isinstance(err, DataUsageError) else 1


if __name__ == "__main__":
    sys.exit(main())
