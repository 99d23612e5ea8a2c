"""One repo's files into a staging folder: per-file resume, retry with backoff, and a checksum for every file.

Each file is written to `<name>.part` and only renamed to `<name>` once its size and checksum match the hub's
listing, so a finished file is never fetched twice and a partial one continues from its last byte (an HTTP
Range). The staging folder records the revision it holds: parts of another revision are never mixed in.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from core.errors import ModelError
from models.hub import RemoteFile, TransientNetworkError

BACKOFF_START = 1.0  # seconds before the first retry ...
BACKOFF_FACTOR = 2.0  # ... doubled for each failure in a row
RETRIES = 5  # failures in a row without a new byte before giving up (1+2+4+8+16 s of waiting)
PART_SUFFIX = ".part"
STATE_FILE = ".engram-download.json"
HASH_BLOCK = 1024 * 1024


class DownloadCancelled(ModelError):
    """The user stopped the download and its partial files were thrown away; nothing was installed."""


class DownloadPaused(ModelError):
    """The user paused: the partial files stay, and the next download of the repo continues from them."""


class ChecksumMismatch(ModelError):
    """A file's bytes do not match the hub's checksum; the file was deleted."""


@dataclass(frozen=True)
class DownloadProgress:
    done_bytes: int
    total_bytes: int
    bytes_per_second: float
    eta_seconds: float | None


def with_retries(attempt: Callable[[], Any], sleep: Callable[[float], Any], what: str,
                 progress_mark: Callable[[], int] = lambda: 0) -> Any:
    """Run `attempt`, retrying a TransientNetworkError after 1, 2, 4... seconds; a failure after new bytes
    arrived (`progress_mark` grew) starts the count again. Gives up with a ModelError in one line."""
    failures = 0
    while True:
        mark = progress_mark()
        try:
            return attempt()
        except TransientNetworkError as exc:
            if progress_mark() > mark:
                failures = 0
            if failures >= RETRIES:
                raise ModelError(f"The download of {what} stopped before it finished ({exc}); nothing was "
                                 f"installed. Run the download again to resume.") from exc
            sleep(BACKOFF_START * BACKOFF_FACTOR ** failures)
            failures += 1


def prepare_staging(staging: Path, revision: str) -> None:
    """Keep what the folder holds only when it is the same revision; otherwise start it over."""
    if staging_revision(staging) not in (None, revision):
        shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True, exist_ok=True)
    (staging / STATE_FILE).write_text(json.dumps({"revision": revision}), encoding="utf-8")


def staging_revision(staging: Path) -> str | None:
    try:
        return str(json.loads((staging / STATE_FILE).read_text(encoding="utf-8"))["revision"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def present_bytes(staging: Path, files: tuple[RemoteFile, ...], revision: str) -> int:
    """Bytes of these files already in the staging folder (finished or partial) for this revision."""
    if staging_revision(staging) != revision:
        return 0
    total = 0
    for file in files:
        final = staging / file.name
        part = final.with_name(final.name + PART_SUFFIX)
        for path in (final, part):
            if path.is_file():
                total += min(path.stat().st_size, file.size)
                break
    return total


def fetch_file(hub: Any, repo_id: str, revision: str, file: RemoteFile, staging: Path, meter: "ProgressMeter",
               sleep: Callable[[float], Any]) -> None:
    final = _target(staging, file.name)
    part = final.with_name(final.name + PART_SUFFIX)
    if final.is_file() and final.stat().st_size == file.size:
        return  # checked when it was finished
    final.parent.mkdir(parents=True, exist_ok=True)
    with_retries(lambda: _fetch_once(hub, repo_id, revision, file, part, meter), sleep, repo_id,
                 progress_mark=lambda: part.stat().st_size if part.is_file() else 0)
    part.replace(final)


def _fetch_once(hub: Any, repo_id: str, revision: str, file: RemoteFile, part: Path, meter: "ProgressMeter") -> None:
    meter.check()
    start = part.stat().st_size if part.is_file() else 0
    if start > file.size:
        part.unlink()
        start = 0
    digest = _digest(file)
    if digest is not None and start:
        with part.open("rb") as handle:
            for block in iter(lambda: handle.read(HASH_BLOCK), b""):
                digest.update(block)
    with part.open("ab") as out:
        for chunk in hub.chunks(repo_id, revision, file.name, start):
            room = file.size - start
            if len(chunk) > room:  # more than the listing said: never written past its size, nor read further
                part.unlink()
                raise ChecksumMismatch(f"The hub sent more bytes than the {file.size} it listed for {file.name}; "
                                       "the file was deleted and nothing was installed.")
            out.write(chunk)
            start += len(chunk)
            if digest is not None:
                digest.update(chunk)
            meter.add(len(chunk))  # may raise DownloadPaused/Cancelled: the bytes written so far stay
    size = part.stat().st_size
    if size < file.size:
        raise TransientNetworkError(f"{file.name} ended after {size} of {file.size} bytes")
    expected = file.sha256 or file.git_sha1
    if size > file.size or (digest is not None and digest.hexdigest() != expected):
        part.unlink()
        raise ChecksumMismatch(f"{file.name} did not match the hub's checksum and was deleted; nothing was "
                               f"installed. Run the download again to fetch it anew.")


def _digest(file: RemoteFile) -> Any:
    if file.sha256:
        return hashlib.sha256()
    if file.git_sha1:
        digest = hashlib.sha1()
        digest.update(b"blob %d\0" % file.size)  # git's blob id: the header, then the content
        return digest
    return None


def _target(staging: Path, name: str) -> Path:
    """A repo file's place in the staging folder; a name that would land outside it is refused."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise ModelError(f"The hub listed a file with an unsafe name ({name!r}); nothing was installed.")
    return staging.joinpath(*parts)


class ProgressMeter:
    """Counts bytes into one progress callback; raises when the user pauses or cancels (checked at every chunk)."""

    def __init__(self, total: int, already: int, callback: Callable[[DownloadProgress], None] | None,
                 cancel: threading.Event, pause: threading.Event, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = already
        self.fetched = 0  # this run's bytes: the rate and ETA count only these
        self.clock = clock
        self.started = clock()
        self.callback = callback
        self.cancel = cancel
        self.pause = pause

    def add(self, count: int) -> None:
        self.done += count
        self.fetched += count
        if self.callback is not None:
            elapsed = max(self.clock() - self.started, 1e-6)
            rate = self.fetched / elapsed
            eta = (self.total - self.done) / rate if rate > 0 else None
            self.callback(DownloadProgress(self.done, self.total, rate, eta))
        self.check()

    def check(self) -> None:
        if self.cancel.is_set():
            raise DownloadCancelled("The download was cancelled; nothing was installed.")
        if self.pause.is_set():
            raise DownloadPaused(f"Paused at {_size(self.done)} of {_size(self.total)}; nothing is installed yet.")


def _size(count: float) -> str:
    for unit, size in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("KB", 1024)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{int(count)} B"
