"""Damage met while the store is open: every layer gets a StoreCorrupt (never apsw's CorruptError), the file is
marked, and nothing more is written into it — by this connection, another one already open, or a background job."""
from __future__ import annotations

import hashlib
from pathlib import Path

import apsw
import pytest

from core.errors import StoreCorrupt
from core.memory.manage import MemoryManager
from core.memory.recall import recall
from core.store import health
from core.store.db import open_db
from tests.fakes import HashEmbedder


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fill(path: Path, memories: int = 300) -> None:
    db = open_db(path)
    manager = MemoryManager(db, HashEmbedder())
    for n in range(memories):
        manager.add(f"Memory number {n}: the user once mentioned gardening, tomatoes and item {n}.")
    db.checkpoint()
    db.close()


def damage_every_other_page(path: Path) -> None:
    """A failing disk under an open store: half the pages after the first few are garbage."""
    page = 4096
    with path.open("r+b") as fh:
        for number in range(4, path.stat().st_size // page, 2):
            fh.seek(number * page)
            fh.write(b"\xa5" * page)


@pytest.fixture
def opened(tmp_path):
    path = tmp_path / "engram.db"
    fill(path)
    db = open_db(path)  # sound when opened: the check on open passes
    other = open_db(path)  # another process's connection, opened before the damage too
    yield path, db, other
    for connection in (db, other):
        connection.close()


def test_a_search_that_meets_damage_says_so_in_words_and_marks_the_file(opened):
    path, db, _ = opened
    damage_every_other_page(path)
    with pytest.raises(StoreCorrupt, match="engram doctor"):
        for _ in range(3):
            recall(db, HashEmbedder(), "gardening tomatoes", k=50)
            MemoryManager(db).list(limit=1000)
    assert health.marker_path(path).exists()


def test_after_damage_is_met_nothing_more_is_written_by_this_or_another_connection(opened):
    path, db, other = opened
    damage_every_other_page(path)
    with pytest.raises(StoreCorrupt):
        MemoryManager(db).list(limit=1000)
    before = digest(path)
    for connection in (db, other):
        with pytest.raises(StoreCorrupt, match="will not write"):
            MemoryManager(connection, HashEmbedder()).add("Written into a damaged file.")
        with pytest.raises(StoreCorrupt):
            with connection.transaction():
                connection.execute("INSERT INTO meta(key, value) VALUES ('x', 'y')")
        with pytest.raises(StoreCorrupt):
            connection.execute("INSERT INTO meta(key, value) VALUES ('z', 'y')")  # even outside a transaction
    assert digest(path) == before


def test_a_write_that_meets_damage_is_rolled_back_and_reported(opened):
    path, db, _ = opened
    damage_every_other_page(path)
    manager = MemoryManager(db, HashEmbedder())
    with pytest.raises(StoreCorrupt):
        for n in range(50):  # some write walks into a damaged page
            manager.add(f"New fact {n} about gardening and tomatoes.")
            manager.list(limit=1000)
    assert health.marker_path(path).exists()


def test_every_error_raised_is_an_engram_error_never_apsw(opened):
    path, db, _ = opened
    damage_every_other_page(path)
    manager = MemoryManager(db, HashEmbedder())
    calls = [lambda: manager.list(limit=1000), lambda: manager.show(150), lambda: manager.pin(151),
             lambda: manager.add("x y z"), lambda: recall(db, HashEmbedder(), "item 7", k=20),
             lambda: manager.export_to(path.parent / "out.json")]
    for call in calls:
        try:
            call()
        except StoreCorrupt:
            pass
        except apsw.Error as exc:  # pragma: no cover - the failure this test is for
            pytest.fail(f"apsw error reached the caller: {exc!r}")


def test_a_background_job_that_meets_damage_stops_the_scheduler_instead_of_writing_its_failure(opened):
    from core.scheduler import JobSpec, Scheduler
    path, db, _ = opened
    ran = []

    def handler(ctx):
        ran.append(1)
        damage_every_other_page(path)
        MemoryManager(db).list(limit=1000)

    scheduler = Scheduler(db, [JobSpec(kind="probe", handler=handler)])
    scheduler.enqueue("probe", run_now=True)
    with pytest.raises(StoreCorrupt):  # the loop ends and says why (the app's Jobs panel shows it)
        scheduler.run_forever(poll_seconds=0.01)
    assert ran == [1] and health.marker_path(path).exists()


def test_a_handler_that_meets_raw_corruption_does_not_record_a_failure_into_the_file(opened):
    from core.scheduler import JobSpec, Scheduler
    path, db, _ = opened
    written = []

    def handler(ctx):
        written.append(digest(path))
        raise apsw.CorruptError("database disk image is malformed")  # met through a cursor of its own

    scheduler = Scheduler(db, [JobSpec(kind="probe", handler=handler)])
    job = scheduler.enqueue("probe", run_now=True)
    db.checkpoint()
    with pytest.raises(StoreCorrupt):
        scheduler.run_job(job.id)
    assert health.marker_path(path).exists()
    assert scheduler.job(job.id).state == "running"  # not 'failed' nor requeued: nothing was written after it
