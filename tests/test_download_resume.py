"""Downloads pause and resume per file, retry transient failures with backoff, and verify every file's checksum.

Against the local fake hub (tests/hubfake.py): no network. The sleeps are recorded, never slept.
"""
from __future__ import annotations

import threading

import pytest

from core.errors import ModelError, ModelMissing
from models.download import STAGING, DownloadCancelled, DownloadPaused, ModelStore, folder_name
from models.fetch import BACKOFF_START, RETRIES
from models.registry import GB
from hubfake import REPO, FakeHub


def make_store(tmp_path, hub, sleeps=None):
    sleeps = [] if sleeps is None else sleeps
    return ModelStore(tmp_path / "models", total_ram=16 * GB, hub=hub, sleep=sleeps.append)


def staged_bytes(store) -> int:
    staging = store.root / STAGING / folder_name(REPO)
    return sum(p.stat().st_size for p in staging.rglob("*") if p.is_file() and not p.name.startswith("."))


def pause_halfway(hub, store):
    """Download until about half the bytes are in, then press Pause (from the progress callback, as the panel's
    button does from another thread)."""
    pause = threading.Event()

    def progress(p):
        if p.done_bytes >= hub.total_bytes() // 2:
            pause.set()
    with pytest.raises(DownloadPaused, match="Paused at"):
        store.download(REPO, progress=progress, pause=pause)


def test_pause_keeps_partial_files_and_resume_fetches_only_the_rest(tmp_path, tiny_model_dir):
    hub = FakeHub(tiny_model_dir, chunk_size=1024)
    store = make_store(tmp_path, hub)
    pause_halfway(hub, store)
    kept = staged_bytes(store)
    assert 0 < kept < hub.total_bytes() and store.installed() == []
    assert hub.served_bytes == kept  # nothing fetched was thrown away
    assert store.plan(REPO).bytes_to_download == hub.total_bytes() - kept
    first = len(hub.requests)
    seen = []
    installed = store.download(REPO, progress=seen.append)
    assert hub.served_bytes == hub.total_bytes()  # the second run fetched only the remaining bytes
    resumed = [(name, start) for name, start in hub.requests[first:] if start > 0]
    assert resumed, "the file that was cut off continues from where it stopped (an HTTP Range)"
    assert seen[0].done_bytes > kept and seen[-1].done_bytes == hub.total_bytes()
    assert store.installed() == [installed] and not (store.root / STAGING / folder_name(REPO)).exists()


def test_cancel_throws_the_partial_files_away(tmp_path, tiny_model_dir):
    hub = FakeHub(tiny_model_dir)
    store = make_store(tmp_path, hub)
    pause_halfway(hub, store)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(DownloadCancelled):
        store.download(REPO, cancel=cancel)
    assert not (store.root / STAGING / folder_name(REPO)).exists() and store.installed() == []


def test_transient_failures_are_retried_with_exponential_backoff(tmp_path, tiny_model_dir):
    sleeps = []
    hub = FakeHub(tiny_model_dir, flaky=1)
    store = make_store(tmp_path, hub, sleeps)
    store.plan(REPO)  # the listing alone is retried too
    assert sleeps == [BACKOFF_START]
    hub.flaky = 3
    told = []
    store.download(REPO, on_retry=told.append)
    assert sleeps[1:] == [BACKOFF_START, BACKOFF_START * 2, BACKOFF_START * 4]
    assert told == sleeps[1:]  # the user is told of each wait
    assert [m.repo_id for m in store.installed()] == [REPO]


def test_a_connection_that_stays_down_gives_up_in_one_line_and_resumes_later(tmp_path, tiny_model_dir):
    sleeps = []
    hub = FakeHub(tiny_model_dir, fail_after_files=2)  # drops halfway through the third file, every time
    store = make_store(tmp_path, hub, sleeps)
    with pytest.raises(ModelError, match="stopped before it finished") as error:
        store.download(REPO)
    assert "\n" not in str(error.value) and "Run the download again to resume" in str(error.value)
    assert sleeps == [BACKOFF_START * 2 ** k for k in range(RETRIES)]
    kept = staged_bytes(store)
    assert store.installed() == [] and kept > 0
    hub.fail_after_files = None
    store.download(REPO)
    assert hub.served_bytes == hub.total_bytes()
    assert [m.repo_id for m in store.installed()] == [REPO]


@pytest.mark.parametrize("damaged", ["model.safetensors", "config.json"])
def test_a_file_that_fails_its_checksum_is_deleted_and_said_so(tmp_path, tiny_model_dir, damaged):
    hub = FakeHub(tiny_model_dir, corrupt=(damaged,))
    store = make_store(tmp_path, hub)
    with pytest.raises(ModelError) as error:
        store.download(REPO)
    message = str(error.value)
    assert "\n" not in message and damaged in message and "checksum" in message and "deleted" in message
    staging = store.root / STAGING / folder_name(REPO)
    assert not (staging / damaged).exists() and not list(staging.glob(f"{damaged}*"))
    assert store.installed() == []
    hub.corrupt = ()
    store.download(REPO)  # the next run fetches that one file again
    assert [m.repo_id for m in store.installed()] == [REPO]


def test_a_new_revision_on_the_hub_starts_the_partial_download_over(tmp_path, tiny_model_dir, monkeypatch):
    import hubfake
    hub = FakeHub(tiny_model_dir)
    store = make_store(tmp_path, hub)
    pause_halfway(hub, store)
    monkeypatch.setattr(hubfake, "REVISION", "f" * 40)
    assert store.plan(REPO).bytes_to_download == hub.total_bytes()  # parts of another revision are not mixed in
    store.download(REPO)
    assert [m.repo_id for m in store.installed()] == [REPO]


def test_nothing_touches_the_hub_until_a_download_is_asked_for(tmp_path, tiny_model_dir):
    hub = FakeHub(tiny_model_dir)
    store = make_store(tmp_path, hub)
    assert store.installed() == [] and store.usable() == []
    with pytest.raises(ModelError, match="not installed"):
        store.resolve(REPO)
    assert hub.calls == 0 and hub.requests == []


@pytest.mark.parametrize("ref", ["", REPO, "/no/such/model-folder"])
def test_a_missing_model_says_what_to_run_and_what_to_click(tmp_path, tiny_model_dir, ref):
    """The command line names the command; the window (`in_app`) names the Models panel and no command."""
    store = make_store(tmp_path, FakeHub(tiny_model_dir))
    with pytest.raises(ModelMissing) as caught:
        store.resolve(ref)
    assert "engram models" in str(caught.value) or "folder" in str(caught.value)
    assert "in Models" in caught.value.in_app and "engram" not in caught.value.in_app


def test_a_pause_cuts_a_real_backoff_wait_short(tmp_path, tiny_model_dir):
    """Without an injected sleep the wait is real, but Pause does not sit out the rest of it."""
    import time
    hub = FakeHub(tiny_model_dir, fail_after_files=2)
    store = ModelStore(tmp_path / "models", total_ram=16 * GB, hub=hub)
    pause = threading.Event()
    started = time.monotonic()
    with pytest.raises(DownloadPaused):
        store.download(REPO, pause=pause, on_retry=lambda seconds: pause.set())
    assert time.monotonic() - started < BACKOFF_START * 0.9  # the first wait alone would have been a full second
