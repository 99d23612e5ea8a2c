"""Rejections: keys of what the user said is wrong, so learning does not keep the same thing again.

Only keys are stored (hashes made by core.memory.rejected), never the text: a purge must leave no text behind.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # annotations only: db imports the migrations, never this module
    from core.store.db import Database


def add_keys(db: Database, keys: Iterable[str], memory_id: int | None) -> None:
    rows = [(key, None if memory_id is None else int(memory_id), db.now()) for key in dict.fromkeys(keys)]
    with db.transaction():
        db.conn.executemany("INSERT OR REPLACE INTO rejections(key, memory_id, created_at) VALUES (?, ?, ?)", rows)


def rejected_keys(db: Database, keys: Iterable[str]) -> set[str]:
    """Which of `keys` the user rejected."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return set()
    marks = ", ".join("?" for _ in wanted)
    return {r[0] for r in db.execute(f"SELECT key FROM rejections WHERE key IN ({marks})", wanted)}


def lift_for_memory(db: Database, memory_id: int) -> int:
    """The user brought the memory back: what they said was wrong no longer is."""
    db.execute("DELETE FROM rejections WHERE memory_id = ?", (int(memory_id),))
    return db.conn.changes()


def lift_keys(db: Database, keys: Iterable[str]) -> int:
    wanted = list(dict.fromkeys(keys))
    if wanted:
        db.conn.executemany("DELETE FROM rejections WHERE key = ?", [(k,) for k in wanted])
    return db.conn.changes() if wanted else 0


def count_rejections(db: Database) -> int:
    return int(db.scalar("SELECT count(*) FROM rejections"))
