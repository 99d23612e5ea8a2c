"""Compaction (KenLM's forgetting as summarisation): conversation turns become one summary memory that keeps
every fact drawn from them. Used by forgetting (core.memory.forget) and by consolidation without a model."""
from __future__ import annotations

import time as _time
from typing import Iterable, Sequence

from core.store import edges, history
from core.store.db import Database
from core.store.memories import add_memory, get_memory, snapshot
from core.words import counted

SECONDS_PER_DAY = 86400.0
SUMMARY_MAX_CHARS = 4000
EXCERPT_CHARS = 160


def episode_groups(db: Database, episode_ids: Sequence[int]) -> list[list[dict]]:
    """The episodes grouped by session (by day when they have none), each group in time order."""
    groups: dict[object, list[dict]] = {}
    for row in rows_in(db, "SELECT id, session_id, user_text, created_at, summary_id FROM episodes "
                           "WHERE id IN ({ids})", episode_ids):
        day = f"day-{int(row['created_at'] // SECONDS_PER_DAY)}"
        groups.setdefault(row["session_id"] if row["session_id"] is not None else day, []).append(row)
    return [sorted(rows, key=lambda r: (r["created_at"], r["id"])) for rows in groups.values()]


def write_summary(db: Database, episodes: Sequence[dict], now: float, *, text: str | None = None,
                  reason: str = "") -> int:
    """A summary memory for these episodes, linked to them and (by 'summary' edges) to their facts."""
    ids = [int(r["id"]) for r in episodes]
    facts = facts_of(db, ids)
    statement = text if text is not None else summary_text(episodes, [f["statement"] for f in facts])
    summary_id = add_memory(db, statement, kind="summary", source_episode_ids=ids, created_at=now,
                            reason=reason or f"compacted {counted(len(ids), 'conversation turn')}")
    for fact in facts:
        edges.set_edge(db, summary_id, int(fact["id"]), "summary", 0.5, at=now)
    return summary_id


def unarchive_summary(db: Database, summary_id: int, now: float) -> None:
    """A summary archived earlier comes back once it is the record of compacted turns."""
    before = get_memory(db, summary_id)
    if before.forgotten_at is None:
        return
    db.execute("UPDATE memories SET forgotten_at = NULL WHERE id = ?", (before.id,))
    history.record(db, before.id, "restore", snapshot(before), snapshot(get_memory(db, before.id)),
                   "it now holds what forgetting compacted", at=now)


def facts_of(db: Database, episode_ids: Sequence[int]) -> list[dict]:
    """The facts (id, statement) drawn from these episodes that were not trashed or closed, oldest first."""
    rows = rows_in(db, "SELECT DISTINCT m.id, m.statement FROM memories m JOIN memory_sources s ON s.memory_id = m.id "
                       "WHERE m.deleted_at IS NULL AND m.invalidated_at IS NULL AND m.kind != 'summary' "
                       "AND s.episode_id IN ({ids}) ORDER BY m.id", episode_ids)
    return sorted({int(r["id"]): r for r in rows}.values(), key=lambda r: int(r["id"]))


def summary_text(episodes: Sequence[dict], facts: Sequence[str]) -> str:
    """Deterministic compaction: every fact kept verbatim, then short excerpts, within SUMMARY_MAX_CHARS."""
    day = _time.strftime("%Y-%m-%d", _time.gmtime(min(r["created_at"] for r in episodes)))
    text = f"Summary of {counted(len(episodes), 'conversation turn')} from {day}."
    if facts:
        text += " Facts: " + " ".join(f.rstrip(".") + "." for f in facts)
    text = text[:SUMMARY_MAX_CHARS]
    for row in episodes:
        addition = f' The user said: "{excerpt(row["user_text"])}"'
        if len(text) + len(addition) > SUMMARY_MAX_CHARS:
            break
        text += addition
    return text


def with_facts(text: str, facts: Sequence[dict]) -> str:
    """A model's summary followed by the facts' statements, so no fact depends on the model's wording."""
    addition = (" Facts: " + " ".join(f["statement"].rstrip(".") + "." for f in facts)) if facts else ""
    return (text.strip() + addition)[:SUMMARY_MAX_CHARS]


def excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS - 1].rstrip() + "…"


def rows_in(db: Database, sql: str, ids: Iterable[int]) -> list[dict]:
    """Run `sql`, whose '{ids}' stands for a list of ids, in chunks (SQLite caps the parameters)."""
    ids = [int(i) for i in ids]
    out: list[dict] = []
    for start in range(0, len(ids), 900):
        chunk = ids[start:start + 900]
        out.extend(db.query(sql.format(ids=",".join("?" * len(chunk))), chunk))
    return out
