"""Entities: the people, places and things that memories are about, linked by role.

A memory's subject and object become entities; entity names are unique regardless of case.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.store.db import Database
from core.types import EntityId, MemoryId

ROLES = ("subject", "object", "mention")
MAX_ENTITY_CHARS = 200  # longer subjects are sentences, not names: they are not made entities


@dataclass(frozen=True)
class Entity:
    id: EntityId
    name: str
    kind: str
    created_at: float


def upsert_entity(db: Database, name: str, kind: str = "") -> EntityId:
    """The id of the entity called `name` (any case), creating it if needed."""
    name = " ".join(name.split())
    found = db.scalar("SELECT id FROM entities WHERE lower(name) = lower(?)", (name,))
    if found is not None:
        return EntityId(found)
    db.execute("INSERT INTO entities(name, kind, created_at) VALUES (?, ?, ?)", (name, kind, db.now()))
    return EntityId(db.conn.last_insert_rowid())


def link(db: Database, memory_id: int, entity_id: int, role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown entity role {role!r}")
    db.execute("INSERT OR IGNORE INTO memory_entities(memory_id, entity_id, role) VALUES (?, ?, ?)",
               (int(memory_id), int(entity_id), role))


def link_triple(db: Database, memory_id: int, subject: str, object: str) -> None:
    """Make (or reuse) entities for a triple's subject and object and link them to the memory."""
    for role, name in (("subject", subject), ("object", object)):
        if name.strip() and len(name) <= MAX_ENTITY_CHARS:
            link(db, memory_id, upsert_entity(db, name), role)


def relink_triple(db: Database, memory_id: int, subject: str, object: str) -> None:
    """After an edit: replace the subject/object links and drop entities nothing points to any more."""
    db.execute("DELETE FROM memory_entities WHERE memory_id = ? AND role IN ('subject', 'object')",
               (int(memory_id),))
    link_triple(db, memory_id, subject, object)
    delete_orphans(db)


def entities_of(db: Database, memory_id: int) -> list[tuple[Entity, str]]:
    rows = db.query("SELECT e.*, me.role FROM memory_entities me JOIN entities e ON e.id = me.entity_id "
                    "WHERE me.memory_id = ? ORDER BY me.role, e.name", (int(memory_id),))
    return [(_entity(r), r["role"]) for r in rows]


def memories_of(db: Database, entity_id: int) -> list[MemoryId]:
    return [MemoryId(r[0]) for r in db.execute(
        "SELECT DISTINCT memory_id FROM memory_entities WHERE entity_id = ? ORDER BY memory_id",
        (int(entity_id),))]


def find_entity(db: Database, name: str) -> Entity | None:
    row = db.query_one("SELECT * FROM entities WHERE lower(name) = lower(?)", (" ".join(name.split()),))
    return None if row is None else _entity(row)


def delete_orphans(db: Database) -> int:
    """Remove entities no memory links to (after a purge their names must leave the file too)."""
    db.execute("DELETE FROM entities WHERE id NOT IN (SELECT entity_id FROM memory_entities)")
    return db.conn.changes()


def _entity(row: dict) -> Entity:
    return Entity(id=EntityId(row["id"]), name=row["name"], kind=row["kind"], created_at=row["created_at"])
