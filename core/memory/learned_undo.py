"""Undo and Restore under a reply, for what that turn learned. A new fact that replaced an older one ("I moved to
Porto" closed "The user lives in Lisbon") takes the replacement with it both ways: Undo trashes the new fact and
reopens the one it closed, Restore brings the new fact back and closes the old one again. Before, Undo left the
person with neither city: the new one in the trash, the old one closed.
"""
from __future__ import annotations

from core.store.db import Database
from core.store.memories import invalidate_memory, reopen_memory, restore_memory, trash_memory
from core.types import Memory


def undo_learned(db: Database, memory_id: int, reason: str = "") -> Memory:
    """To the trash, reopening what it had replaced."""
    with db.transaction():
        trashed = trash_memory(db, memory_id, reason)
        for old in _replaced_by(db, memory_id):
            reopen_memory(db, old, reason=f"memory {memory_id}, which had replaced it, was undone")
    return trashed


def redo_learned(db: Database, memory_id: int, reason: str = "") -> Memory:
    """Back from the trash, closing again what its undo had reopened (if nothing changed it since)."""
    with db.transaction():
        restored = restore_memory(db, memory_id, reason)
        for old in _reopened_for(db, memory_id):
            invalidate_memory(db, old, superseded_by=memory_id, reason=f"replaced again by memory {memory_id}")
    return restored


def _replaced_by(db: Database, memory_id: int) -> list[int]:
    return [int(r[0]) for r in db.execute(
        "SELECT id FROM memories WHERE superseded_by = ? AND invalidated_at IS NOT NULL AND deleted_at IS NULL "
        "AND forgotten_at IS NULL", (int(memory_id),))]


def _reopened_for(db: Database, memory_id: int) -> list[int]:
    """Still-open memories whose last reopening was this memory's undo."""
    return [int(r[0]) for r in db.execute(
        "SELECT m.id FROM memories m WHERE m.invalidated_at IS NULL AND m.deleted_at IS NULL "
        "AND m.forgotten_at IS NULL AND (SELECT json_extract(h.old_value, '$.superseded_by') FROM memory_history h "
        "WHERE h.memory_id = m.id AND h.action = 'restore' ORDER BY h.at DESC, h.id DESC LIMIT 1) = ?",
        (int(memory_id),))]
