"""Removing a fact that replaced another brings the other back. "I moved to Porto" closed "The user lives in
Lisbon" (reconcile: a contradiction); when the person then trashes Porto — Undo under the reply, Delete or "This is
wrong" in Memories, `engram memory delete` — Lisbon holds again, and restoring Porto closes Lisbon again. Before,
the person was left with neither city: the new one in the trash, the old one closed.

Replacements chain (Lisbon → Porto → Berlin), and removals and restorations come in any order, so each one settles
the whole chain rather than one link: of the facts in it the person has not removed (trashed, rejected, forgotten,
or closed by hand), the newest holds and every other is closed, superseded by it. A chain is every fact linked by
a replacement ever recorded in the history (a reopening clears `superseded_by`, never the history), and for a
relation a person has one of at a time (said_reconcile.one_at_a_time) every fact of that subject and relation,
linked or not: a home said again after the old one was trashed has no link to it. A fact pinned,
protected, permanent or critical while it was open stays open: nothing automatic closes those.
"""
from __future__ import annotations

from core.memory.said_reconcile import one_at_a_time
from core.store.db import Database
from core.store.memories import get_memories, invalidate_memory, reopen_memory, restore_memory, trash_memory
from core.types import Memory

LINKS = ("SELECT memory_id AS older, CAST(json_extract(new_value, '$.superseded_by') AS INTEGER) AS newer "
         "FROM memory_history WHERE action = 'invalidate' AND json_extract(new_value, '$.superseded_by') IS NOT NULL")


def trash(db: Database, memory_id: int, reason: str = "") -> Memory:
    """To the trash; the newest fact left in its chain holds again."""
    with db.transaction():
        trashed = trash_memory(db, memory_id, reason)
        settle(db, memory_id)
    return trashed


def restore(db: Database, memory_id: int, reason: str = "") -> Memory:
    """Back from the trash (or from forgetting); its chain is settled again (it holds if it is the newest)."""
    with db.transaction():
        restored = restore_memory(db, memory_id, reason)
        settle(db, memory_id)
    return get_memories(db, [restored.id])[restored.id]


def reopen_replaced(db: Database, memory_id: int) -> list[int]:
    """After `memory_id` left (rejected): settle its chain; the ids reopened."""
    return settle(db, memory_id)


def settle(db: Database, memory_id: int) -> list[int]:
    """The newest fact of the chain that the person has not removed holds; the others it replaced are closed.
    Returns the ids reopened."""
    chain = get_memories(db, sorted(_chain(db, int(memory_id))))
    if len(chain) < 2:
        return []
    kept = [m for m in chain.values() if _kept(m)]
    if not kept:
        return []
    holder = max(kept, key=lambda m: (m.created_at, m.id))
    reopened: list[int] = []
    if holder.invalidated_at is not None:
        reopen_memory(db, holder.id, reason=f"the facts that had replaced it were removed (memory {memory_id})")
        reopened.append(holder.id)
    for other in kept:
        if other.id != holder.id and other.invalidated_at is None and not other.is_untouchable:
            invalidate_memory(db, other.id, superseded_by=holder.id, reason=f"replaced again by memory {holder.id}")
    return reopened


def _kept(memory: Memory) -> bool:
    """Not removed by the person: not in the trash, not forgotten, and not closed other than by a replacement."""
    closed_by_hand = memory.invalidated_at is not None and memory.superseded_by is None
    return memory.deleted_at is None and memory.forgotten_at is None and not closed_by_hand


def _chain(db: Database, memory_id: int) -> set[int]:
    """Every memory linked to `memory_id` by a replacement, in either direction and at any distance."""
    links = db.execute(f"WITH links AS ({LINKS}), chain(id) AS (SELECT ? UNION "
                       "SELECT links.older FROM links JOIN chain ON links.newer = chain.id UNION "
                       "SELECT links.newer FROM links JOIN chain ON links.older = chain.id) SELECT id FROM chain",
                       (memory_id,)).fetchall()
    found = {int(r[0]) for r in links}
    row = db.query_one("SELECT subject, relation FROM memories WHERE id = ?", (memory_id,))
    if row and row["relation"] and one_at_a_time(row["relation"]):
        found.update(int(r[0]) for r in db.execute(
            "SELECT id FROM memories WHERE relation = ? AND lower(subject) = lower(?) AND kind != 'summary'",
            (row["relation"], row["subject"])))
    return found
