"""Migration 11: the pins made since the last look are found through an index on memory_history(action, id). Every
turn's learning, `engram recall-weights` and Settings ask (core.memory.recall_learning.collect_pins); without it
each asked by reading every history row (100k memories: 267 MB of the store, 71 ms)."""
from __future__ import annotations

from core.store.db import open_db
from core.store.memories import add_memory, set_flag
from core.store.migrations import LATEST_VERSION, MIGRATIONS

ASKED = "SELECT 1 FROM memory_history WHERE action = 'pin' AND id > ? LIMIT 1"  # collect_pins's question, verbatim


def plan(db, sql: str) -> str:
    return " ".join(str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", (0,)).fetchall())


def test_an_older_store_gains_the_index_and_keeps_its_history(tmp_path, clock):
    path = tmp_path / "engram.db"
    older = open_db(path, clock=clock, migrations=MIGRATIONS[:10])
    kept = add_memory(older, "The user keeps bees")
    set_flag(older, kept, "pinned", True)
    assert "memory_history_action" not in plan(older, ASKED)  # every row after the last pin seen: all, without one
    older.close()
    migrated = open_db(path, clock=clock)
    assert migrated.schema_version() == LATEST_VERSION == 11
    assert "USING COVERING INDEX memory_history_action" in plan(migrated, ASKED)
    assert [r[0] for r in migrated.execute("SELECT action FROM memory_history ORDER BY id")] == ["create", "pin"]
    assert migrated.scalar(ASKED, (0,)) == 1
    migrated.close()
