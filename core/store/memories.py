"""Memories: atomic facts as (subject, relation, object) triples plus a one-line statement.

Rows only; vectors are written by core.memory.index. Every change records a history row.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from core.errors import InvalidInput, NotFound
from core.store import history
from core.store.db import Database
from core.store.text import clean_text
from core.types import MEMORY_KINDS, EpisodeId, Memory, MemoryId

_FLAGS = ("critical", "pinned", "protected", "permanent")


def add_memory(db: Database, statement: str, *, subject: str = "", relation: str = "", object: str = "",
               kind: str = "semantic", critical: bool = False, confidence: float = 0.7,
               importance: float = 0.0, source_episode_ids: Sequence[int] = (),
               valid_from: float | None = None, created_at: float | None = None,
               reason: str = "") -> MemoryId:
    """Insert one memory with its sources and a 'create' history row; returns its id."""
    statement = clean_text(statement, "statement")
    subject, relation, object = (clean_text(v, name, allow_empty=True, max_chars=2000)
                                 for v, name in ((subject, "subject"), (relation, "relation"), (object, "object")))
    if kind not in MEMORY_KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(MEMORY_KINDS)}, not {kind!r}")
    confidence = _unit(confidence, "confidence")
    now = db.now() if created_at is None else created_at
    with db.transaction():
        db.execute(
            "INSERT INTO memories(subject, relation, object, statement, kind, critical, confidence, importance,"
            " created_at, updated_at, valid_from) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (subject, relation, object, statement, kind, int(bool(critical)), confidence, float(importance),
             now, now, valid_from if valid_from is not None else now))
        memory_id = MemoryId(db.conn.last_insert_rowid())
        link_sources(db, memory_id, source_episode_ids)
        history.record(db, memory_id, "create", None, snapshot(get_memory(db, memory_id)), reason, at=now)
    return memory_id


def link_sources(db: Database, memory_id: int, episode_ids: Iterable[int]) -> None:
    for episode_id in episode_ids:
        if db.scalar("SELECT 1 FROM episodes WHERE id = ?", (int(episode_id),)) is None:
            raise NotFound(f"no episode with id {episode_id}")
        db.execute("INSERT OR IGNORE INTO memory_sources(memory_id, episode_id) VALUES (?, ?)",
                   (int(memory_id), int(episode_id)))


def get_memory(db: Database, memory_id: int) -> Memory:
    row = db.query_one("SELECT * FROM memories WHERE id = ?", (_id(memory_id),))
    if row is None:
        raise NotFound(f"no memory with id {memory_id}")
    return row_to_memory(db, row)


def get_memories(db: Database, ids: Sequence[int]) -> dict[MemoryId, Memory]:
    """Several memories at once, keyed by id; unknown ids are left out."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.query(f"SELECT * FROM memories WHERE id IN ({marks})", [int(i) for i in ids])
    sources = _sources(db, [r["id"] for r in rows])
    return {MemoryId(r["id"]): row_to_memory(db, r, sources.get(r["id"], ())) for r in rows}


def row_to_memory(db: Database, row: dict[str, Any], sources: Sequence[int] | None = None) -> Memory:
    if sources is None:
        sources = _sources(db, [row["id"]]).get(row["id"], ())
    values = {k: row[k] for k in Memory.__dataclass_fields__ if k in row}
    for flag in _FLAGS:
        values[flag] = bool(values[flag])
    return Memory(**values, source_episode_ids=tuple(EpisodeId(i) for i in sources))


def snapshot(memory: Memory) -> dict[str, Any]:
    """The user-visible state of a memory, as stored in history rows."""
    return {"statement": memory.statement, "subject": memory.subject, "relation": memory.relation,
            "object": memory.object, "kind": memory.kind, "critical": memory.critical,
            "confidence": memory.confidence, "pinned": memory.pinned, "protected": memory.protected,
            "permanent": memory.permanent, "valid_from": memory.valid_from, "valid_to": memory.valid_to}


def _sources(db: Database, ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    found: dict[int, list[int]] = {}
    for memory_id, episode_id in db.execute(
            f"SELECT memory_id, episode_id FROM memory_sources WHERE memory_id IN ({marks}) "
            "ORDER BY episode_id", list(ids)):
        found.setdefault(memory_id, []).append(episode_id)
    return {k: tuple(v) for k, v in found.items()}


def _id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value).strip())
        except ValueError:
            raise InvalidInput(f"{value!r} is not a memory id") from None
    return value


def _unit(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name} must be a number between 0 and 1") from None
    if not 0.0 <= number <= 1.0:
        raise InvalidInput(f"{name} must be between 0 and 1, not {number}")
    return number
