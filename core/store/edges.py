"""Weighted, undirected edges between memories, stored once with a_id < b_id (MAGS, 001)."""
from __future__ import annotations

from typing import Iterable, Sequence

from core.errors import InvalidInput
from core.store.db import Database
from core.types import Edge, MemoryId

EDGE_KINDS = ("hebbian", "similarity", "supersedes", "summary")


def _pair(a: int, b: int) -> tuple[int, int]:
    if int(a) == int(b):
        raise InvalidInput("an edge joins two different memories")
    return (int(a), int(b)) if int(a) < int(b) else (int(b), int(a))


def _kind(kind: str) -> str:
    if kind not in EDGE_KINDS:
        raise InvalidInput(f"edge kind must be one of {', '.join(EDGE_KINDS)}, not {kind!r}")
    return kind


def set_edge(db: Database, a: int, b: int, kind: str, weight: float, *, at: float | None = None) -> None:
    """Create the edge or set its weight (similarity, supersedes and summary links)."""
    lo, hi = _pair(a, b)
    now = db.now() if at is None else at
    db.execute("INSERT INTO edges(a_id, b_id, kind, weight, last_coactivated, created_at) VALUES (?,?,?,?,NULL,?) "
               "ON CONFLICT(a_id, b_id, kind) DO UPDATE SET weight = excluded.weight",
               (lo, hi, _kind(kind), float(weight), now))


def strengthen(db: Database, pairs: Iterable[tuple[int, int]], rate: float, *, at: float | None = None) -> int:
    """Hebbian step w ← w + rate·(1 − w) for each co-used pair; returns the pairs touched."""
    now = db.now() if at is None else at
    count = 0
    with db.transaction():
        for a, b in pairs:
            lo, hi = _pair(a, b)
            db.execute(
                "INSERT INTO edges(a_id, b_id, kind, weight, last_coactivated, created_at) "
                "VALUES (?, ?, 'hebbian', ?, ?, ?) ON CONFLICT(a_id, b_id, kind) DO UPDATE SET "
                "weight = weight + ? * (1.0 - weight), last_coactivated = excluded.last_coactivated",
                (lo, hi, float(rate), now, now, float(rate)))
            count += 1
    return count


def decay_hebbian(db: Database, factor: float, min_weight: float) -> int:
    """Multiply every Hebbian weight by `factor` and drop the ones that faded below `min_weight`."""
    with db.transaction():
        db.execute("UPDATE edges SET weight = weight * ? WHERE kind = 'hebbian'", (float(factor),))
        db.execute("DELETE FROM edges WHERE kind = 'hebbian' AND weight < ?", (float(min_weight),))
        return int(db.conn.changes())


def edges_of(db: Database, memory_id: int, kind: str | None = None) -> list[Edge]:
    sql = "SELECT * FROM edges WHERE (a_id = ? OR b_id = ?)"
    params: list = [int(memory_id), int(memory_id)]
    if kind is not None:
        sql += " AND kind = ?"
        params.append(_kind(kind))
    return [_edge(r) for r in db.query(sql + " ORDER BY weight DESC", params)]


def get_edge(db: Database, a: int, b: int, kind: str) -> Edge | None:
    lo, hi = _pair(a, b)
    row = db.query_one("SELECT * FROM edges WHERE a_id = ? AND b_id = ? AND kind = ?", (lo, hi, _kind(kind)))
    return None if row is None else _edge(row)


def all_edges(db: Database, kinds: Sequence[str] = EDGE_KINDS) -> list[tuple[int, int, float]]:
    """(a, b, weight) of every edge between two active memories, for PageRank."""
    marks = ",".join("?" * len(kinds))
    return [(int(a), int(b), float(w)) for a, b, w in db.execute(
        f"SELECT e.a_id, e.b_id, e.weight FROM edges e "
        f"JOIN active_memories ma ON ma.id = e.a_id JOIN active_memories mb ON mb.id = e.b_id "
        f"WHERE e.kind IN ({marks})", [_kind(k) for k in kinds])]


def _edge(row: dict) -> Edge:
    return Edge(a_id=MemoryId(row["a_id"]), b_id=MemoryId(row["b_id"]), kind=row["kind"], weight=row["weight"],
                last_coactivated=row["last_coactivated"], created_at=row["created_at"])
