"""Adapter versions and their lineage: every trained adapter is kept with its metrics and the ids it
learned from; at most one is active; rolling back to the base model is one call.

Staleness is set by triggers (migration 2) whenever a memory, episode or hypothesis an adapter learned from
is edited, trashed or purged, so it holds whichever code path made the change.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from core.errors import InvalidInput, NotFound
from core.store.db import Database

ADAPTER_STATUSES = ("training", "candidate", "accepted", "rejected", "failed")


@dataclass(frozen=True)
class Adapter:
    id: int
    name: str
    base_model: str
    path: str
    status: str
    active: bool
    metrics: Mapping[str, Any]
    config: Mapping[str, Any]
    created_at: float
    parent_id: Optional[int] = None
    stale_at: Optional[float] = None
    stale_reason: str = ""
    activated_at: Optional[float] = None

    @property
    def is_stale(self) -> bool:
        return self.stale_at is not None


def _row(row: Mapping[str, Any]) -> Adapter:
    data = dict(row)
    data["metrics"] = json.loads(data["metrics"] or "{}")
    data["config"] = json.loads(data["config"] or "{}")
    data["active"] = bool(data["active"])
    return Adapter(**data)


def record_adapter(db: Database, *, name: str, base_model: str, path: str, status: str,
                   metrics: Mapping[str, Any], config: Mapping[str, Any], sources: Mapping[str, Iterable[int]],
                   parent_id: Optional[int] = None) -> Adapter:
    """Add a finished adapter version with its metrics and lineage in one transaction."""
    if status not in ADAPTER_STATUSES:
        raise InvalidInput(f"unknown adapter status {status!r}")
    with db.transaction():
        db.execute("INSERT INTO adapters(name, base_model, path, parent_id, status, metrics, config, created_at) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (name, base_model, path, parent_id, status, json.dumps(dict(metrics)), json.dumps(dict(config)),
                    db.now()))
        adapter_id = db.conn.last_insert_rowid()
        for item_type, ids in sources.items():
            db.conn.executemany(
                "INSERT OR IGNORE INTO adapter_sources(adapter_id, item_type, item_id) VALUES (?, ?, ?)",
                [(adapter_id, item_type, int(i)) for i in ids])
    return get_adapter(db, adapter_id)


def get_adapter(db: Database, adapter_id: int) -> Adapter:
    row = db.query_one("SELECT * FROM adapters WHERE id = ?", (int(adapter_id),))
    if row is None:
        raise NotFound(f"no adapter with id {adapter_id}")
    return _row(row)


def list_adapters(db: Database) -> list[Adapter]:
    return [_row(r) for r in db.query("SELECT * FROM adapters ORDER BY id DESC")]


def active_adapter(db: Database) -> Optional[Adapter]:
    row = db.query_one("SELECT * FROM adapters WHERE active = 1")
    return _row(row) if row else None


def activate(db: Database, adapter_id: int) -> Adapter:
    """Make this version the active one (the user may pick any kept version that trained successfully)."""
    adapter = get_adapter(db, adapter_id)
    if adapter.status in ("training", "failed"):
        raise InvalidInput(f"adapter {adapter_id} is {adapter.status}; only a trained adapter can be activated")
    now = db.now()
    with db.transaction():
        db.execute("UPDATE adapters SET active = 0 WHERE active = 1")
        db.execute("UPDATE adapters SET active = 1, activated_at = ? WHERE id = ?", (now, adapter.id))
    return get_adapter(db, adapter.id)


def rollback_to_base(db: Database) -> Optional[Adapter]:
    """Switch every adapter off: chat uses the base model. Returns the adapter that was active."""
    previous = active_adapter(db)
    db.execute("UPDATE adapters SET active = 0 WHERE active = 1")
    return previous


def sources(db: Database, adapter_id: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"memory": [], "episode": [], "hypothesis": []}
    for row in db.query("SELECT item_type, item_id FROM adapter_sources WHERE adapter_id = ? ORDER BY item_id",
                        (int(adapter_id),)):
        out[row["item_type"]].append(row["item_id"])
    return out


def adapters_using(db: Database, item_type: str, item_id: int) -> list[Adapter]:
    """The adapter versions that learned from this item: the GUI warns before an edit touches the active one."""
    rows = db.query("SELECT a.* FROM adapters a JOIN adapter_sources s ON s.adapter_id = a.id "
                    "WHERE s.item_type = ? AND s.item_id = ? ORDER BY a.id DESC", (item_type, int(item_id)))
    return [_row(r) for r in rows]


def active_is_stale(db: Database) -> Optional[str]:
    """Why the active adapter is stale (for "Engram says so"), or None."""
    active = active_adapter(db)
    return active.stale_reason or "stale" if active is not None and active.is_stale else None


def active_adapter_notice(db: Database, item_type: str, item_ids: Iterable[int]) -> str:
    """What to tell the user after they edited or deleted items the active adapter learned from ("" if none)."""
    active = active_adapter(db)
    ids = sorted({int(i) for i in item_ids})
    if active is None or not ids:
        return ""
    used = db.scalar(f"SELECT count(*) FROM adapter_sources WHERE adapter_id = ? AND item_type = ? AND item_id IN "
                     f"({','.join('?' * len(ids))})", (active.id, item_type, *ids))
    if not used:
        return ""
    plural = {"memory": "memories", "episode": "conversation turns", "hypothesis": "hypotheses"}[item_type]
    what = f"this {item_type}" if len(ids) == 1 else f"{used} of these {plural}"
    return (f"The active fine-tuned adapter ({active.name}) learned from {what}: it is now marked stale and the "
            "next fine-tune leaves it out. To stop using it now, roll back to the base model (Jobs panel, or "
            "`engram finetune rollback`).")
