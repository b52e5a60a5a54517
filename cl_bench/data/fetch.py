"""HTTP downloads for ``cl-bench-data`` on pooch, with resume of a cut transfer.

pooch (``pooch.retrieve`` with ``known_hash``) does the hash check and the atomic move into place; it
has no resume of a cut download, so its documented custom-downloader hook gets :class:`RangeDownloader`,
which streams through :class:`pooch.HTTPDownloader` (tqdm progress) into ``<file>.part`` and continues
with an HTTP ``Range`` request after a cut connection. Nothing here knows cl-bench's manifest or data
root (that is :mod:`cl_bench.data.download`).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pooch
import requests
import urllib3
from tqdm import tqdm

from cl_bench import __version__
from cl_bench.utils.progress import progress_bar

CHUNK = 1 << 16


class DataDownloadError(RuntimeError):
    """A download or build step failed; the message says what and how to fix it."""


class OfflineError(DataDownloadError):
    """The source host cannot be reached at all (no DNS, connection refused): stop at once."""


class ChecksumError(DataDownloadError):
    """A file's SHA-256 differs from the one recorded for it."""


class DataUsageError(DataDownloadError):
    """A bad argument of ``cl-bench-data`` (an unknown ``--only`` source, a malformed ``--url``): exit status 2."""


class _ConnectionCut(Exception):
    """The transfer stopped before the announced length (resumable)."""


def sha256_file(path: str | Path, decompress: bool = False) -> str:
    """SHA-256 of a file's bytes, or of its gunzipped content with ``decompress``."""
    digest = hashlib.sha256()
    opener = gzip.open if decompress else open
    with opener(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _is_offline(err: requests.RequestException) -> bool:
    """No TCP connection at all (DNS failure, refused, unreachable, connect timeout): nothing to retry."""
    if isinstance(err, requests.exceptions.ConnectTimeout):
        return True
    reason = err.args[0] if err.args else None
    reason = getattr(reason, "reason", reason)  # urllib3's MaxRetryError wraps the connect error
    return isinstance(reason, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError)


def _total_from_content_range(value: str | None) -> int | None:
    # "bytes 100-199/200" or "bytes */200"
    if not value or "/" not in value:
        return None
    total = value.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


@dataclass
class RangeDownloader:
    """A pooch downloader (``downloader(url, output_file, pooch)``) that resumes cut downloads.

    pooch's own HTTP downloader starts over after a failure; this one keeps the bytes so far in
    ``part`` (``<file>.part``) and continues with an HTTP ``Range`` request, both within one call
    (``retries`` times) and across calls (the ``.part`` file stays when it gives up). When the
    transfer is whole it moves ``part`` to pooch's temporary ``output_file``; pooch then checks the
    hash and moves it into place (or deletes it on a mismatch).
    """

    part: Path
    retries: int = 3
    timeout: float = 30.0
    progress: bool = True
    digest: str | None = None  # SHA-256 of the finished transfer (also when no hash is published)

    def __call__(self, url: str, output_file: str, pooch_instance: object = None) -> None:
        """Fetch ``url`` into ``self.part`` (resuming), then move it to ``output_file``."""
        for attempt in range(self.retries + 1):
            try:
                self._get_once(url)
                break
            except _ConnectionCut as err:
                if attempt == self.retries:
                    have = self.part.stat().st_size if self.part.exists() else 0
                    raise DataDownloadError(
                        f"{url}: {err}; {have} bytes kept in {self.part} — run the same command again to resume"
                    ) from err
        self.digest = sha256_file(self.part)
        os.replace(self.part, output_file)

    def _get_once(self, url: str) -> None:
        """One GET into ``part`` through :class:`pooch.HTTPDownloader`, from the part's size with ``Range``."""
        offset = self.part.stat().st_size if self.part.exists() else 0
        headers = {"User-Agent": f"cl-bench/{__version__}", **({"Range": f"bytes={offset}-"} if offset else {})}
        expected: list[int] = []  # the whole file's size, when the response says it

        def on_response(response: requests.Response, *args: object, **kwargs: object) -> requests.Response:
            """requests' response hook: runs before pooch streams the body into ``out``."""
            # Keep every byte of a cut transfer (urllib3 would drop its last partial chunk and raise):
            # the length is checked below, and the next GET resumes exactly where the bytes end.
            response.raw.enforce_content_length = False
            if response.status_code == 206:
                expected.extend(filter(None, [_total_from_content_range(response.headers.get("Content-Range"))]))
            elif response.status_code == 200:
                if offset:  # the server ignored the Range header: start again
                    out.seek(0)
                    out.truncate()
                length = response.headers.get("Content-Length", "")
                expected.extend([int(length)] if length.isdigit() else [])
            return response

        # total=1 until pooch sets the real one (pooch tests the bar's truth value first)
        # a bar on a terminal, plain lines (no \r frames) in a log file or a pipe
        bar = progress_bar(1, self.part.stem, self.progress, sys.stderr, write=_stderr_line, tqdm_class=tqdm,
                           unit="B", unit_scale=True, unit_divisor=1024, leave=False)
        get = pooch.HTTPDownloader(progressbar=bar if self.progress else False, chunk_size=CHUNK, headers=headers,
                                   timeout=self.timeout, hooks={"response": on_response})
        try:
            with open(self.part, "ab") as out:
                get(url, out, None)
        except requests.HTTPError as err:
            status = err.response.status_code if err.response is not None else None
            if status == 416 and offset:
                # Range past the end: the part is already whole if the server's total says so.
                if _total_from_content_range(err.response.headers.get("Content-Range")) == offset:
                    return
                self.part.unlink()
                raise _ConnectionCut("stale partial file discarded") from err
            raise DataDownloadError(f"{url}: HTTP {status} {err.response.reason if status else err}") from err
        except requests.RequestException as err:
            if _is_offline(err):
                raise OfflineError(f"{url}: cannot connect ({err})") from err
            have = self.part.stat().st_size
            raise _ConnectionCut(f"connection lost after {have} bytes ({type(err).__name__})") from err
        finally:
            bar.close()
            if self.part.exists() and not self.part.stat().st_size:
                self.part.unlink()  # nothing arrived: leave no empty part behind
        have = self.part.stat().st_size
        if expected and have < expected[0]:
            raise _ConnectionCut(f"connection closed after {have} of {expected[0]} bytes")


def _stderr_line(line: str) -> None:
    """A plain progress line on stderr, where the bar would be drawn."""
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def quiet_pooch() -> Iterator[None]:
    """pooch logs every download at INFO on stderr; cl-bench prints its own lines."""
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel("WARNING")
    try:
        yield
    finally:
        logger.setLevel(level)


def fetch(
    url: str,
    dest: Path,
    expected_sha256: str | None = None,
    retries: int = 3,
    timeout: float = 30.0,
    progress: bool = True,
) -> str:
    """Download ``url`` to ``dest`` with :func:`pooch.retrieve`, resuming after cut connections.

    Args:
        url: http(s) URL.
        dest: final path; ``dest.part`` holds the bytes so far (a later call resumes from it).
        expected_sha256: checked (by pooch) before ``dest`` is written; None = no published checksum.
        retries: resume attempts within this call after a cut connection.
        timeout: socket timeout in seconds.
        progress: show a tqdm progress bar on stderr.

    Returns:
        The SHA-256 of the downloaded file.

    Raises:
        OfflineError: the host cannot be reached (fails at once, no retry).
        ChecksumError: the file's SHA-256 differs from ``expected_sha256`` (the file is removed).
        DataDownloadError: HTTP error, or the connection kept dropping (the ``.part`` file stays
            for the next call to resume).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    downloader = RangeDownloader(dest.with_name(dest.name + ".part"), retries, timeout, progress)
    known = f"sha256:{expected_sha256}" if expected_sha256 else None
    try:
        with quiet_pooch():
            # retry_if_failed stays 0: pooch would retry an offline host with sleeps; resume is ours.
            pooch.retrieve(url, known, fname=dest.name, path=dest.parent, downloader=downloader)
    except ValueError as err:  # pooch: hash mismatch (it has deleted the download)
        if expected_sha256 is None or "hash" not in str(err):
            raise
        got = downloader.digest or "?"
        raise ChecksumError(
            f"{dest.name}: checksum mismatch (sha256 {got[:16]}…, expected {expected_sha256[:16]}…): "
            f"the download from {url} is corrupt and was removed; run the download again"
        ) from err
    return downloader.digest or sha256_file(dest)  # no digest: pooch found dest already in place
