"""The append-only history of every change to a memory."""
from __future__ import annotations

import json
from typing import Any

from core.store.db import Database
from core.types import HISTORY_ACTIONS, HistoryEntry, MemoryId


def record(db: Database, memory_id: int, action: str, old: dict[str, Any] | None = None,
           new: dict[str, Any] | None = None, reason: str = "", at: float | None = None) -> int:
    if action not in HISTORY_ACTIONS:
        raise ValueError(f"unknown history action {action!r}")
    db.execute("INSERT INTO memory_history(memory_id, action, old_value, new_value, reason, at) "
               "VALUES (?, ?, ?, ?, ?, ?)",
               (int(memory_id), action, _dump(old), _dump(new), reason, db.now() if at is None else at))
    return int(db.conn.last_insert_rowid())


def history(db: Database, memory_id: int) -> list[HistoryEntry]:
    rows = db.query("SELECT * FROM memory_history WHERE memory_id = ? ORDER BY at, id", (int(memory_id),))
    return [HistoryEntry(id=r["id"], memory_id=MemoryId(r["memory_id"]), action=r["action"],
                         old_value=_load(r["old_value"]), new_value=_load(r["new_value"]),
                         reason=r["reason"], at=r["at"]) for r in rows]


def _dump(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _load(text: str | None) -> dict[str, Any] | None:
    return None if text is None else json.loads(text)
