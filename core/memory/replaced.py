"""Removing a fact that replaced another brings the other back. "I moved to Porto" closed "The user lives in
Lisbon" (reconcile: a contradiction); when the person then trashes Porto — Undo under the reply, Delete or "This is
wrong" in Memories, `engram memory delete` — Lisbon holds again, and restoring Porto closes Lisbon again. Before,
the person was left with neither city: the new one in the trash, the old one closed.
"""
from __future__ import annotations

from core.store.db import Database
from core.store.memories import invalidate_memory, reopen_memory, restore_memory, trash_memory
from core.types import Memory


def trash(db: Database, memory_id: int, reason: str = "") -> Memory:
    """To the trash, reopening what it had replaced."""
    with db.transaction():
        trashed = trash_memory(db, memory_id, reason)
        reopen_replaced(db, memory_id)
    return trashed


def restore(db: Database, memory_id: int, reason: str = "") -> Memory:
    """Back from the trash (or from forgetting), closing again what its removal had reopened, if nothing changed
    that since."""
    with db.transaction():
        restored = restore_memory(db, memory_id, reason)
        for old in _reopened_for(db, memory_id):
            invalidate_memory(db, old, superseded_by=memory_id, reason=f"replaced again by memory {memory_id}")
    return restored


def reopen_replaced(db: Database, memory_id: int) -> list[int]:
    """Reopen the closed facts this memory had superseded (not those in the trash or forgotten); their ids."""
    ids = [int(r[0]) for r in db.execute(
        "SELECT id FROM memories WHERE superseded_by = ? AND invalidated_at IS NOT NULL AND deleted_at IS NULL "
        "AND forgotten_at IS NULL", (int(memory_id),))]
    for old in ids:
        reopen_memory(db, old, reason=f"memory {memory_id}, which had replaced it, was removed")
    return ids


def _reopened_for(db: Database, memory_id: int) -> list[int]:
    """Still-open memories whose last reopening was this memory's removal; one pinned, protected, permanent or
    critical since is left open (nothing automatic closes those)."""
    return [int(r[0]) for r in db.execute(
        "SELECT m.id FROM memories m WHERE m.invalidated_at IS NULL AND m.deleted_at IS NULL "
        "AND m.forgotten_at IS NULL AND NOT (m.pinned OR m.protected OR m.permanent OR m.critical) AND (SELECT json_extract(h.old_value, '$.superseded_by') FROM memory_history h "
        "WHERE h.memory_id = m.id AND h.action = 'restore' ORDER BY h.at DESC, h.id DESC LIMIT 1) = ?",
        (int(memory_id),))]
