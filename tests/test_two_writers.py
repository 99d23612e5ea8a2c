"""A second writer never fails: the vector is made before the write lock is taken, writes take the lock up front,
and a store kept busy is retried, then reported in words — never a 'database is locked' traceback."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

from core.errors import StoreBusy
from core.memory.manage import MemoryManager
from core.store.db import open_db
from core.store.memories import count_memories
from tests.fakes import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]


class WritesWhileEmbedding(HashEmbedder):
    """Each embed() is where another process writes: it succeeds only if no write transaction is held now."""

    def __init__(self, path: Path) -> None:
        self.other = apsw.Connection(str(path))
        self.other.set_busy_timeout(0)
        self.outcomes: list[str] = []

    def embed(self, texts):
        try:
            self.other.execute("INSERT INTO meta(key, value) VALUES (?, 'x') ON CONFLICT(key) DO NOTHING",
                               (f"probe-{len(self.outcomes)}",))
            self.outcomes.append("wrote")
        except apsw.BusyError:
            self.outcomes.append("busy")
        return super().embed(texts)


@pytest.fixture
def store(tmp_path):
    database = open_db(tmp_path / "engram.db")
    yield database
    database.close()


def test_add_edit_and_import_embed_before_they_take_the_write_lock(store, tmp_path):
    spy = WritesWhileEmbedding(store.path)
    manager = MemoryManager(store, spy)
    memory = manager.add("I live in Lisbon.")
    manager.edit(memory.id, statement="I live in Porto.")
    exported = tmp_path / "export.json"
    manager.export_to(exported)
    manager.import_from(exported)
    assert spy.outcomes and set(spy.outcomes) == {"wrote"}
    spy.other.close()


def test_a_store_kept_busy_is_retried_and_then_reported_with_nothing_changed(store):
    manager = MemoryManager(store, HashEmbedder())
    store.conn.set_busy_timeout(20)
    holder = apsw.Connection(str(store.path))
    holder.execute("BEGIN IMMEDIATE")
    pauses = []
    store.busy_pauses, store.sleep = (0.0, 0.0), pauses.append
    with pytest.raises(StoreBusy, match="another Engram process"):
        manager.add("I like tea.")
    assert pauses == [0.0, 0.0]
    holder.execute("ROLLBACK")
    assert count_memories(store) == 0


def test_a_writer_that_lets_go_during_the_retry_is_waited_for(store):
    manager = MemoryManager(store, HashEmbedder())
    store.conn.set_busy_timeout(20)
    holder = apsw.Connection(str(store.path))
    holder.execute("BEGIN IMMEDIATE")
    store.sleep = lambda _: holder.execute("ROLLBACK")
    memory = manager.add("I like tea.")
    assert memory.statement == "I like tea." and count_memories(store) == 1


def test_a_read_then_write_transaction_and_another_writer_both_succeed(store):
    """A deferred transaction that read first fails at once when another process commits meanwhile (its snapshot
    went stale); a write transaction takes the lock before it reads, so the other writer waits its turn."""
    import threading
    import time

    MemoryManager(store, HashEmbedder()).add("first")
    other = open_db(store.path)
    errors: list[BaseException] = []

    def other_writes() -> None:
        try:
            with other.transaction():
                other.execute("INSERT INTO meta(key, value) VALUES ('other', 'v')")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    try:
        with store.transaction():
            store.scalar("SELECT count(*) FROM memories")
            writer = threading.Thread(target=other_writes)
            writer.start()
            time.sleep(0.3)  # the other process tries to write now
            store.execute("INSERT INTO meta(key, value) VALUES ('mine', 'v')")
        writer.join(10)
        assert errors == []
        assert store.scalar("SELECT count(*) FROM meta WHERE key IN ('mine', 'other')") == 2
    finally:
        other.close()


CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {root!r})
    from core.errors import EngramError
    from core.memory.manage import MemoryManager
    from core.memory.recall import recall
    from core.store.db import open_db
    from tests.fakes import HashEmbedder
    db = open_db({path!r})
    manager, embedder = MemoryManager(db, HashEmbedder()), HashEmbedder()
    acknowledged, failures, deadline = [], [], time.monotonic() + {seconds}
    while time.monotonic() < deadline:
        try:
            memory = manager.add("writer {name} note %d" % len(acknowledged))
            acknowledged.append(memory.id)
            if len(acknowledged) % 5 == 0:
                recall(db, embedder, "writer note", k=5)
                manager.pin(memory.id)
        except EngramError as exc:
            failures.append(str(exc))
    print(json.dumps({{"acknowledged": acknowledged, "failures": failures}}))
""")


def test_two_processes_writing_and_searching_at_once_lose_nothing_and_never_fail(store):
    MemoryManager(store, HashEmbedder()).add("bound")  # binds the embedder before the writers race
    store.close()
    children = [subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT), path=str(store.path),
                                                                     seconds=8, name=name)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in "AB"]
    reports = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        reports.append(json.loads(out))
    reopened = open_db(store.path)
    try:
        stored = {row["id"] for row in reopened.query("SELECT id FROM memories")}
        for report in reports:
            assert report["failures"] == []
            assert len(report["acknowledged"]) > 10
            assert set(report["acknowledged"]) <= stored
        assert reopened.scalar("PRAGMA integrity_check") == "ok"
    finally:
        reopened.close()
