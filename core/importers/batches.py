"""The imports a store holds, and taking one back as a whole.

An import is its batch (core.importers.write.batch_id): listing says what each brought and how much of it has been
learned from; undoing trashes its turns and conversations, and the memories learned only from them, all in one
transaction, each restorable from the trash like anything the user deletes. A memory that a turn of the user's
own, outside the import, also supports stays. Protected and pinned memories stay too, and so do protected turns: the
user chose them.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterable

from core.errors import InvalidInput
from core.importers.conversations import SOURCES
from core.memory import replaced
from core.store.db import Database


@dataclass(frozen=True)
class Batch:
    batch: str
    source: str
    conversations: int
    turns: int  # in the store now (not in the trash)
    learned: int  # turns whose learning is done or given up
    first: float  # the oldest turn's time
    last: float
    memories: int  # active memories whose every source is in this batch

    def describe(self) -> str:
        name = SOURCES.get(self.source, self.source)
        span = f"{_day(self.first)} to {_day(self.last)}"
        return (f"{self.batch}: from {name}, {self.conversations:,} conversations, {self.turns:,} turns ({span}), "
                f"{self.learned:,} learned from so far, {self.memories:,} memories")


_BATCH = "json_extract(e.metadata, '$.imported.batch')"


def list_batches(db: Database) -> list[Batch]:
    rows = db.query(
        f"SELECT {_BATCH} AS batch, json_extract(e.metadata, '$.imported.from') AS source, "
        "count(DISTINCT e.session_id) AS conversations, count(*) AS turns, "
        "sum(coalesce(json_extract(e.metadata, '$.learning'), '') <> 'pending') AS learned, "
        "min(e.created_at) AS first, max(e.created_at) AS last FROM episodes e "
        f"WHERE {_BATCH} IS NOT NULL AND e.deleted_at IS NULL GROUP BY batch ORDER BY max(e.id) DESC")
    return [Batch(r["batch"], r["source"] or "", r["conversations"], r["turns"], r["learned"] or 0, r["first"],
                  r["last"], len(_memories_only_from(db, r["batch"]))) for r in rows]


def undo_batch(db: Database, batch: str) -> tuple[int, int, int]:
    """Trash what the import `batch` brought; (turns, conversations, memories) trashed."""
    if not isinstance(batch, str) or not batch or db.scalar(
            f"SELECT 1 FROM episodes e WHERE {_BATCH} = ? AND e.deleted_at IS NULL LIMIT 1", (batch,)) is None:
        raise InvalidInput(f"no import {batch!r} in this store (`engram import list` shows them)")
    with db.transaction():
        memory_ids = _memories_only_from(db, batch)
        for memory_id in memory_ids:
            replaced.trash(db, memory_id, reason=f"the import {batch} was undone")
        now = db.now()
        session_ids = [r[0] for r in db.execute(
            f"SELECT DISTINCT e.session_id FROM episodes e WHERE {_BATCH} = ? AND e.session_id IS NOT NULL", (batch,))]
        db.execute(f"UPDATE episodes AS e SET deleted_at = ? WHERE {_BATCH} = ? AND e.deleted_at IS NULL "
                   "AND e.protected = 0", (now, batch))
        turns = db.conn.changes()
        trashed_sessions = 0
        for session_id in session_ids:  # a conversation the user went on with in Engram keeps its own turns
            if db.scalar("SELECT 1 FROM episodes WHERE session_id = ? AND deleted_at IS NULL LIMIT 1",
                         (session_id,)) is None:
                db.execute("UPDATE sessions SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL", (now, session_id))
                trashed_sessions += 1
    return turns, trashed_sessions, len(memory_ids)


def import_labels(db: Database, episode_ids: Iterable[int]) -> dict[int, str]:
    """'imported from ChatGPT, 2024-05-02' for each of these episodes that an import brought."""
    ids = [int(i) for i in episode_ids]
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {r[0]: r[1] for r in db.execute(
        f"SELECT id, json_extract(metadata, '$.imported.label') FROM episodes WHERE id IN ({marks}) "
        "AND json_extract(metadata, '$.imported.label') IS NOT NULL", ids)}


def memory_import_sources(db: Database) -> dict[int, str]:
    """Active memory id → the assistant it was learned from ("ChatGPT"), for memories whose every source turn an
    import brought; a memory the user's own words in Engram also support is theirs, not the import's."""
    rows = db.execute(
        "SELECT s.memory_id, min(json_extract(e.metadata, '$.imported.from')), "
        "sum(json_extract(e.metadata, '$.imported.from') IS NULL) FROM memory_sources s "
        "JOIN episodes e ON e.id = s.episode_id JOIN active_memories m ON m.id = s.memory_id GROUP BY s.memory_id")
    return {memory_id: SOURCES.get(source, source) for memory_id, source, own in rows if source and not own}


def session_import_labels(db: Database, session_ids: Iterable[int]) -> dict[int, str]:
    """'imported from Claude, 2024-05-02' (its first turn's) for each of these conversations an import brought."""
    ids = [int(i) for i in session_ids]
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {r[0]: r[1] for r in db.execute(  # SQLite's bare column beside min(): the label of the first turn
        "SELECT session_id, json_extract(metadata, '$.imported.label'), min(created_at) FROM episodes "
        f"WHERE session_id IN ({marks}) AND json_extract(metadata, '$.imported.label') IS NOT NULL "
        "GROUP BY session_id", ids)}


def _memories_only_from(db: Database, batch: str) -> list[int]:
    """Found from the batch's turns and their sources, not by asking every memory of the store about its sources
    (`engram import list` read 95 MB of a 100k-memory store for it)."""
    return [r[0] for r in db.execute(
        "SELECT m.id FROM active_memories m WHERE m.id IN (SELECT s.memory_id FROM episodes e "
        f"JOIN memory_sources s ON s.episode_id = e.id WHERE {_BATCH} = :b) AND m.pinned = 0 AND m.protected = 0 "
        "AND NOT EXISTS (SELECT 1 FROM memory_sources s JOIN episodes e ON e.id = s.episode_id "
        f"WHERE s.memory_id = m.id AND coalesce({_BATCH}, '') <> :b) ORDER BY m.id", {"b": batch})]


def _day(at: float | None) -> str:
    return "?" if at is None else dt.datetime.fromtimestamp(at, dt.timezone.utc).date().isoformat()
