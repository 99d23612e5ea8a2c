"""A local stand-in for the Hugging Face hub (models.hub.HubClient): serves one repo from a folder, never the network.

Shared by the download, Models-panel and `engram models` tests. It lists files with their checksums as the hub does
(sha256 for the weights, which the hub keeps in LFS; the git blob id for the small files), serves any file from a
byte offset (an HTTP Range), and counts what it sent. It can drop the connection halfway through a file, refuse the
next few requests, serve a corrupted file, or hold each file until a gate opens (to test pause and cancel).
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from core.errors import ModelError
from models.hub import RemoteFile, RepoListing, TransientNetworkError

REPO = "tiny-org/tiny-4bit"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeHub:
    source: Path
    repo_id: str = REPO
    fail_after_files: int | None = None  # serve this many files, then drop halfway through the next, every time
    gate: threading.Event | None = None  # when set, each file waits for it (up to 10 s)
    hold: threading.Event | None = None  # when set, every chunk after the first one sent waits for it (up to 10 s)
    flaky: int = 0  # refuse this many requests (listing or file) before answering
    corrupt: tuple[str, ...] = ()  # serve these files with one byte changed; the listing keeps the true checksum
    chunk_size: int = 4096
    calls: int = 0  # listings asked for
    served_bytes: int = 0
    requests: list[tuple[str, int]] = field(default_factory=list)  # (file, first byte asked for)

    def files(self) -> list[Path]:
        return sorted(p for p in Path(self.source).iterdir() if p.is_file())

    def total_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files())

    def listing(self, repo_id: str) -> RepoListing:
        self.calls += 1
        self._maybe_refuse()
        if repo_id != self.repo_id:
            raise ModelError(f"Cannot reach {repo_id} on Hugging Face: 404 Repository Not Found")
        remote = []
        for path in self.files():
            data = path.read_bytes()
            lfs = path.suffix == ".safetensors"
            remote.append(RemoteFile(path.name, len(data), hashlib.sha256(data).hexdigest() if lfs else None,
                                     None if lfs else git_blob_sha1(data)))
        return RepoListing(REVISION, tuple(remote))

    def chunks(self, repo_id: str, revision: str, filename: str, start: int) -> Iterator[bytes]:
        self._maybe_refuse()
        assert revision == REVISION, "a download reads one pinned revision"
        self.requests.append((filename, start))
        if self.gate is not None:
            self.gate.wait(10)
        names = [p.name for p in self.files()]
        data = (Path(self.source) / filename).read_bytes()
        if filename in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        stop = len(data)
        if self.fail_after_files is not None and names.index(filename) >= self.fail_after_files:
            stop = len(data) // 2
        for offset in range(start, stop, self.chunk_size):
            if self.hold is not None and self.served_bytes:
                self.hold.wait(10)
            chunk = data[offset:min(offset + self.chunk_size, stop)]
            self.served_bytes += len(chunk)
            yield chunk
        if stop < len(data):
            raise TransientNetworkError("connection reset by peer")

    def cached(self, repo_id: str) -> Path | None:
        return None  # nothing in a Hugging Face cache

    def _maybe_refuse(self) -> None:
        if self.flaky > 0:
            self.flaky -= 1
            raise TransientNetworkError("connection refused")
