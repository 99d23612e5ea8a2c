"""The real HubClient over HTTP against a hub on 127.0.0.1 (tests/hubserver.py): listing with checksums, Range
resume after a pause or a dropped connection, a server that ignores Range, 503s retried, a corrupted file refused."""
from __future__ import annotations

import threading

import pytest

from core.errors import ModelError
from models.download import STAGING, DownloadPaused, ModelStore, folder_name
from models.hub import HubClient
from models.registry import GB
from hubfake import REPO, REVISION
from hubserver import HubServer


@pytest.fixture(autouse=True)
def _local_hub_only(monkeypatch):
    """The suite runs with HF_HUB_OFFLINE (tests/conftest.py); these tests reach 127.0.0.1 and nothing else."""
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def server(tiny_model_dir):
    with HubServer(tiny_model_dir) as hub:
        yield hub


def make_store(tmp_path, server, sleeps):
    return ModelStore(tmp_path / "models", total_ram=16 * GB, hub=HubClient(endpoint=server.url),
                      sleep=sleeps.append)


def test_the_listing_carries_the_checksums(server):
    listing = HubClient(endpoint=server.url).listing(REPO)
    assert listing.revision == REVISION
    by_name = {f.name: f for f in listing.files}
    weights = by_name["model.safetensors"]
    assert weights.sha256 and weights.git_sha1 is None and weights.size == (server.source / weights.name).stat().st_size
    assert by_name["config.json"].git_sha1 and by_name["config.json"].sha256 is None


def test_an_unknown_repo_is_a_clear_error(server):
    with pytest.raises(ModelError, match="Cannot reach tiny-org/missing"):
        HubClient(endpoint=server.url).listing("tiny-org/missing")


def test_a_dropped_connection_is_retried_from_the_byte_it_stopped_at(tmp_path, server):
    size = (server.source / "model.safetensors").stat().st_size
    server.drop_after["model.safetensors"] = size // 3
    sleeps = []
    store = make_store(tmp_path, server, sleeps)
    store.download(REPO)
    assert sleeps == [1.0]
    assert ("model.safetensors", size // 3) in server.ranges  # Range: bytes=<where it stopped>-
    assert server.served_bytes == server.total_bytes()
    assert [m.repo_id for m in store.installed()] == [REPO]


def test_pause_then_resume_fetches_only_the_remaining_bytes(tmp_path, server):
    store = make_store(tmp_path, server, [])
    pause = threading.Event()

    def progress(p):
        if p.done_bytes >= server.total_bytes() // 2:
            pause.set()
    with pytest.raises(DownloadPaused):
        store.download(REPO, progress=progress, pause=pause)
    staging = store.root / STAGING / folder_name(REPO)
    kept = {p.name.removesuffix(".part"): p.stat().st_size for p in staging.iterdir() if not p.name.startswith(".")}
    finished = {p.name for p in staging.iterdir() if not p.name.startswith(".") and not p.name.endswith(".part")}
    assert 0 < sum(kept.values()) < server.total_bytes() and len(finished) < len(server.files())
    asked_before = len(server.ranges)
    store.download(REPO)
    asked = server.ranges[asked_before:]
    assert not finished & {name for name, _ in asked}  # finished files are not fetched again
    assert all(start == kept.get(name, 0) for name, start in asked)  # the cut-off one continues where it stopped
    assert any(start > 0 for _, start in asked)
    assert [m.repo_id for m in store.installed()] == [REPO]


def test_a_server_that_ignores_range_still_gives_a_correct_file(tmp_path, server):
    server.ignore_range = True
    size = (server.source / "model.safetensors").stat().st_size
    server.drop_after["model.safetensors"] = size // 2
    store = make_store(tmp_path, server, [])
    store.download(REPO)  # the checksum passing is the proof the skipped bytes were dropped, not appended twice
    assert [m.repo_id for m in store.installed()] == [REPO]


def test_a_busy_hub_is_retried_with_backoff(tmp_path, server):
    server.busy = 2
    sleeps = []
    make_store(tmp_path, server, sleeps).download(REPO)
    assert sleeps == [1.0, 2.0]
