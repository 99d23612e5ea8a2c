"""A hub that sends more than it listed, or lists a file named as Engram's own bookkeeping (issue 37, item 7 and the
messages): a download stops writing at the listed size (300 MB were written for a file listed at 1,951 bytes before
the checksum refused it), and a listing naming `.engram-download.json` is refused at once (it cost 31 s of retries).
Against the local fake hub (tests/hubfake.py): no network."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pytest

from core.errors import ModelError
from models.download import STAGING, ModelStore, folder_name
from models.fetch import STATE_FILE
from models.hub import RemoteFile, RepoListing
from models.registry import GB
from hubfake import REPO, FakeHub

ENDLESS_BYTES = 8 * 2**20  # what the hub would go on sending, far past any listed size


@dataclass
class EndlessHub(FakeHub):
    """Lists the true sizes, then sends config.json followed by megabytes of more bytes."""
    sent_past: int = 0

    def chunks(self, repo_id: str, revision: str, filename: str, start: int) -> Iterator[bytes]:
        yield from super().chunks(repo_id, revision, filename, start)
        if filename == "config.json":
            for _ in range(ENDLESS_BYTES // 65536):
                self.sent_past += 65536
                yield b"x" * 65536


@dataclass
class ListsOurStateFile(FakeHub):
    def listing(self, repo_id: str) -> RepoListing:
        listing = super().listing(repo_id)
        return RepoListing(listing.revision, (*listing.files, RemoteFile(STATE_FILE, 40, None, "0" * 40)))


def store_for(tmp_path, hub, sleeps) -> ModelStore:
    return ModelStore(tmp_path / "models", total_ram=16 * GB, hub=hub, sleep=sleeps.append)


def test_a_hub_sending_past_the_listed_size_is_cut_off_at_that_size(tmp_path, tiny_model_dir):
    hub = EndlessHub(tiny_model_dir, chunk_size=1024)
    listed = (tiny_model_dir / "config.json").stat().st_size
    largest = []

    store = store_for(tmp_path, hub, [])
    staging = store.root / STAGING / folder_name(REPO)

    def progress(_):
        part = staging / "config.json.part"
        if part.is_file():
            largest.append(part.stat().st_size)

    with pytest.raises(ModelError, match="more bytes than"):
        store.download(REPO, progress=progress)
    assert max(largest, default=0) <= listed
    assert hub.sent_past < ENDLESS_BYTES  # it stopped reading too
    assert not (staging / "config.json.part").exists() and store.installed() == []


def test_a_listing_naming_engrams_own_state_file_is_refused_at_once(tmp_path, tiny_model_dir):
    sleeps: list[float] = []
    store = store_for(tmp_path, ListsOurStateFile(tiny_model_dir), sleeps)
    with pytest.raises(ModelError, match=STATE_FILE.replace(".", r"\.")):
        store.plan(REPO)
    with pytest.raises(ModelError, match="keeps for itself"):
        store.download(REPO)
    assert sleeps == [] and store.installed() == []
