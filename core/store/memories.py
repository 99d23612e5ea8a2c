"""Memories: atomic facts as (subject, relation, object) triples plus a one-line statement.

Rows only; vectors are written by core.memory.index. Every change records a history row.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from core.errors import InvalidInput, NotFound
from core.store import entities, history, rejections, vectors
from core.store.db import Database
from core.store.text import MAX_INT, MAX_TEXT_CHARS, clean_text, clean_time
from core.types import MEMORY_KINDS, EpisodeId, Memory, MemoryId

_FLAGS = ("critical", "pinned", "protected", "permanent")
# The history action each flag change is logged under: (turned on, turned off).
_FLAG_ACTIONS = {"pinned": ("pin", "unpin"), "protected": ("protect", "unprotect"),
                 "permanent": ("permanent", "update"), "critical": ("update", "update")}
STATUSES = ("active", "trashed", "forgotten", "invalidated")
_STATUS_SQL = {
    "active": "invalidated_at IS NULL AND forgotten_at IS NULL AND deleted_at IS NULL",
    "trashed": "deleted_at IS NOT NULL",
    "forgotten": "forgotten_at IS NOT NULL AND deleted_at IS NULL",
    "invalidated": "invalidated_at IS NOT NULL AND forgotten_at IS NULL AND deleted_at IS NULL",
}
_TEXT_FIELDS = ("statement", "subject", "relation", "object")


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
    importance = _number(importance, "importance")
    now = db.now() if created_at is None else clean_time(created_at, "created_at")
    valid_from = None if valid_from is None else clean_time(valid_from, "valid_from")
    with db.transaction():
        db.execute(
            "INSERT INTO memories(subject, relation, object, statement, kind, critical, confidence, importance,"
            " created_at, updated_at, valid_from) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (subject, relation, object, statement, kind, int(bool(critical)), confidence, float(importance),
             now, now, valid_from if valid_from is not None else now))
        memory_id = MemoryId(db.conn.last_insert_rowid())
        link_sources(db, memory_id, source_episode_ids)
        entities.link_triple(db, memory_id, subject, object)
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


def get_memories(db: Database, ids: Sequence[int]) -> dict[int, Memory]:
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


def update_memory(db: Database, memory_id: int, *, statement: str | None = None, subject: str | None = None,
                  relation: str | None = None, object: str | None = None, kind: str | None = None,
                  confidence: float | None = None, importance: float | None = None,
                  valid_from: float | None = None, valid_to: float | None = None, reason: str = "") -> Memory:
    """Change a memory's content in place; the old values stay in an 'update' history row."""
    changes = _checked_changes(statement=statement, subject=subject, relation=relation, object=object,
                               kind=kind, confidence=confidence, importance=importance,
                               valid_from=valid_from, valid_to=valid_to)
    before = get_memory(db, memory_id)
    if before.deleted_at is not None:
        raise InvalidInput(f"memory {before.id} is in the trash; restore it before editing")
    changes = {k: v for k, v in changes.items() if getattr(before, k) != v}
    if not changes:
        return before
    with db.transaction():
        _set(db, before.id, **changes)
        if any(k in ("subject", "object") for k in changes):
            after_triple = {**{"subject": before.subject, "object": before.object}, **changes}
            entities.relink_triple(db, before.id, after_triple["subject"], after_triple["object"])
        after = get_memory(db, before.id)
        history.record(db, before.id, "update", snapshot(before), snapshot(after), reason)
    return after


def set_flag(db: Database, memory_id: int, flag: str, value: bool, reason: str = "") -> Memory:
    """Pin, protect, mark permanent or critical (or undo it); no history row when nothing changes."""
    if flag not in _FLAG_ACTIONS:
        raise InvalidInput(f"flag must be one of {', '.join(_FLAG_ACTIONS)}, not {flag!r}")
    before = get_memory(db, memory_id)
    if getattr(before, flag) == bool(value):
        return before
    action = _FLAG_ACTIONS[flag][0 if value else 1]
    with db.transaction():
        _set(db, before.id, **{flag: int(bool(value))})
        history.record(db, before.id, action, {flag: getattr(before, flag)}, {flag: bool(value)}, reason)
    return get_memory(db, before.id)


def trash_memory(db: Database, memory_id: int, reason: str = "") -> Memory:
    """Soft delete: the memory goes to the trash, out of recall, restorable until purged."""
    before = get_memory(db, memory_id)
    if before.deleted_at is not None:
        raise InvalidInput(f"memory {before.id} is already in the trash")
    if before.protected:
        raise InvalidInput(f"memory {before.id} is protected; unprotect it before deleting it")
    now = db.now()
    with db.transaction():
        _set(db, before.id, deleted_at=now)
        history.record(db, before.id, "delete", {"status": before.status}, {"status": "trashed"}, reason, at=now)
    return get_memory(db, before.id)


def restore_memory(db: Database, memory_id: int, reason: str = "") -> Memory:
    """Bring a trashed or forgotten memory back to where it was before."""
    before = get_memory(db, memory_id)
    if before.deleted_at is None and before.forgotten_at is None:
        raise InvalidInput(f"memory {before.id} is not in the trash or forgotten; there is nothing to restore")
    now = db.now()
    with db.transaction():
        _set(db, before.id, deleted_at=None, forgotten_at=None)
        db.execute("UPDATE forgetting_events SET restored_at = ? WHERE item_type = 'memory' AND item_id = ? "
                   "AND restored_at IS NULL", (now, before.id))
        rejections.lift_for_memory(db, before.id)  # brought back by hand: the user no longer says it is wrong
        after = get_memory(db, before.id)
        history.record(db, before.id, "restore", {"status": before.status}, {"status": after.status},
                       reason, at=now)
    return after


def invalidate_memory(db: Database, memory_id: int, *, valid_to: float | None = None,
                      superseded_by: int | None = None, reason: str = "") -> Memory:
    """Close a fact that no longer holds: it is kept, never overwritten (bi-temporal validity)."""
    before = get_memory(db, memory_id)
    if before.invalidated_at is not None:
        raise InvalidInput(f"memory {before.id} is already invalidated")
    if superseded_by is not None:
        get_memory(db, superseded_by)
    now = db.now()
    with db.transaction():
        _set(db, before.id, invalidated_at=now, valid_to=now if valid_to is None else valid_to,
             superseded_by=None if superseded_by is None else int(superseded_by))
        after = get_memory(db, before.id)
        history.record(db, before.id, "invalidate", snapshot(before),
                       {**snapshot(after), "superseded_by": after.superseded_by}, reason, at=now)
    return after


def reopen_memory(db: Database, memory_id: int, reason: str = "") -> Memory:
    """A closed fact holds again (what replaced it was undone): its validity reopens, its closing stays in history
    (a 'restore' entry whose old value names what had superseded it)."""
    before = get_memory(db, memory_id)
    if before.invalidated_at is None:
        raise InvalidInput(f"memory {before.id} is not closed; there is nothing to reopen")
    now = db.now()
    with db.transaction():
        _set(db, before.id, invalidated_at=None, valid_to=None, superseded_by=None)
        history.record(db, before.id, "restore", {**snapshot(before), "superseded_by": before.superseded_by},
                       snapshot(get_memory(db, before.id)), reason, at=now)
    return get_memory(db, before.id)


def list_memories(db: Database, *, kind: str | None = None, pinned: bool | None = None,
                  protected: bool | None = None, critical: bool | None = None, status: str | None = "active",
                  limit: int = 100, offset: int = 0) -> list[Memory]:
    """Memories matching every given filter, newest first; status None means all of them."""
    where, params = _filters(kind=kind, pinned=pinned, protected=protected, critical=critical, status=status)
    rows = db.query(f"SELECT * FROM memories WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                    [*params, int(limit), int(offset)])
    sources = _sources(db, [r["id"] for r in rows])
    return [row_to_memory(db, r, sources.get(r["id"], ())) for r in rows]


def count_memories(db: Database, *, status: str | None = "active", **filters: Any) -> int:
    where, params = _filters(status=status, **filters)
    return int(db.scalar(f"SELECT count(*) FROM memories WHERE {where}", params))


def purge_memory_rows(db: Database, ids: Sequence[int], reason: str = "") -> int:
    """Hard delete of trashed memories: rows, vectors, FTS terms, links, edges and the text in history.

    A 'purge' history row without any text remains, so the log still says the memory existed.
    """
    memories = [get_memory(db, i) for i in ids]
    for memory in memories:
        if memory.deleted_at is None:
            raise InvalidInput(f"memory {memory.id} is not in the trash; delete it before purging it")
    with db.transaction():
        vectors.delete_vectors(db, "memory", [m.id for m in memories])
        for memory in memories:
            db.execute("DELETE FROM memory_history WHERE memory_id = ?", (memory.id,))
            db.execute("DELETE FROM memories WHERE id = ?", (memory.id,))  # FTS, links, edges by trigger/cascade
            history.record(db, memory.id, "purge", None, None, reason)
        entities.delete_orphans(db)
    return len(memories)


def trashed_memory_ids(db: Database) -> list[MemoryId]:
    return [MemoryId(r[0]) for r in db.execute("SELECT id FROM memories WHERE deleted_at IS NOT NULL ORDER BY id")]


def _checked_changes(**values: Any) -> dict[str, Any]:
    changes = {k: v for k, v in values.items() if v is not None}
    for name in _TEXT_FIELDS:
        if name in changes:
            limit = MAX_TEXT_CHARS if name == "statement" else 2000
            changes[name] = clean_text(changes[name], name, allow_empty=name != "statement", max_chars=limit)
    if "kind" in changes and changes["kind"] not in MEMORY_KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(MEMORY_KINDS)}, not {changes['kind']!r}")
    if "confidence" in changes:
        changes["confidence"] = _unit(changes["confidence"], "confidence")
    if "importance" in changes:
        changes["importance"] = _number(changes["importance"], "importance")
    for name in ("valid_from", "valid_to"):
        if name in changes:
            changes[name] = clean_time(changes[name], name)
    return changes


def _set(db: Database, memory_id: int, **values: Any) -> None:
    values["updated_at"] = db.now()
    assignments = ", ".join(f"{name} = ?" for name in values)
    db.execute(f"UPDATE memories SET {assignments} WHERE id = ?", [*values.values(), int(memory_id)])


def _filters(*, kind: str | None = None, pinned: bool | None = None, protected: bool | None = None,
             critical: bool | None = None, status: str | None = None) -> tuple[str, list[Any]]:
    clauses = ["1"]
    params: list[Any] = []
    if status is not None:
        if status not in _STATUS_SQL:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        clauses.append(_STATUS_SQL[status])
    if kind is not None:
        if kind not in MEMORY_KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(MEMORY_KINDS)}, not {kind!r}")
        clauses.append("kind = ?")
        params.append(kind)
    for name, wanted in (("pinned", pinned), ("protected", protected), ("critical", critical)):
        if wanted is not None:
            clauses.append(f"{name} = ?")
            params.append(int(bool(wanted)))
    return " AND ".join(clauses), params


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
    if not -MAX_INT - 1 <= value <= MAX_INT:  # SQLite's integers: a larger one is no row's id
        raise NotFound(f"no memory with id {value}")
    return value


def _number(value: Any, name: str) -> float:
    if isinstance(value, str):
        raise InvalidInput(f"{name} must be a number")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"{name} must be a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidInput(f"{name} must be a finite number")
    return number


def _unit(value: Any, name: str) -> float:
    if isinstance(value, str):  # float("nan") and float("0.5") would pass; a string is not a number here
        raise InvalidInput(f"{name} must be a number between 0 and 1")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"{name} must be a number between 0 and 1") from None
    if not 0.0 <= number <= 1.0:
        raise InvalidInput(f"{name} must be between 0 and 1, not {number}")
    return number
