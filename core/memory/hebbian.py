"""Hebbian learning on the memory graph (MAGS): use counts, co-activation, decay.

- touch: a memory a reply drew on is used once more (access_count, last_access; core.memory.attribution).
- coactivate: memories used together in one reply refresh the clock of the edges that already join them
  (no new edge: only usefulness creates one).
- reinforce: memories used together AND rated useful strengthen their edge, w ← w + rate·(1 − w).
- weaken: a memory the user vetoed keeps `factor` (HebbianSettings.veto_factor) of its edges to the others
  of that reply.
- decay_edges: unused Hebbian edges fade, w ← w·(1 − decay_per_day)^days since the last pass; edges
  that fall below min_edge_weight are dropped. Helper B2's importance pass calls it.
"""
from __future__ import annotations

from itertools import combinations
from typing import Iterable, Sequence

from core.config import HebbianSettings
from core.store import edges
from core.store.db import Database

SECONDS_PER_DAY = 86400.0
DECAY_META_KEY = "hebbian_decayed_at"


def touch(db: Database, memory_ids: Iterable[int], *, at: float | None = None) -> int:
    """One more use for each memory; returns the rows changed."""
    ids = sorted({int(i) for i in memory_ids})
    if not ids:
        return 0
    now = db.now() if at is None else at
    marks = ",".join("?" * len(ids))
    db.execute(f"UPDATE memories SET access_count = access_count + 1, last_access = ? WHERE id IN ({marks})",
               [now, *ids])
    return int(db.conn.changes())


def pairs(memory_ids: Iterable[int]) -> list[tuple[int, int]]:
    """Every unordered pair of distinct ids, (low, high)."""
    return list(combinations(sorted({int(i) for i in memory_ids}), 2))


def coactivate(db: Database, memory_ids: Sequence[int], *, at: float | None = None) -> int:
    """Refresh last_coactivated on the Hebbian edges already joining memories used together."""
    ids = sorted({int(i) for i in memory_ids})
    if len(ids) < 2:
        return 0
    now = db.now() if at is None else at
    marks = ",".join("?" * len(ids))
    db.execute(f"UPDATE edges SET last_coactivated = ? WHERE kind = 'hebbian' AND a_id IN ({marks}) "
               f"AND b_id IN ({marks})", [now, *ids, *ids])
    return int(db.conn.changes())


def reinforce(db: Database, useful_ids: Sequence[int], settings: HebbianSettings, *,
              at: float | None = None) -> int:
    """Strengthen the edge of every pair of memories that were used together and proved useful."""
    return edges.strengthen(db, pairs(useful_ids), settings.learning_rate, at=at)


def weaken(db: Database, memory_id: int, others: Sequence[int], *, factor: float) -> int:
    """Lower the Hebbian edges between a vetoed memory and the others of its reply."""
    mates = sorted({int(o) for o in others} - {int(memory_id)})
    if not mates:
        return 0
    marks = ",".join("?" * len(mates))
    db.execute(f"UPDATE edges SET weight = weight * ? WHERE kind = 'hebbian' AND "
               f"((a_id = ? AND b_id IN ({marks})) OR (b_id = ? AND a_id IN ({marks})))",
               [float(factor), int(memory_id), *mates, int(memory_id), *mates])
    return int(db.conn.changes())


def decayed_weight(weight: float, days: float, decay_per_day: float) -> float:
    """An edge's weight after `days` without use: exponential fade at decay_per_day."""
    return weight * (1.0 - decay_per_day) ** max(days, 0.0)


def decay_edges(db: Database, settings: HebbianSettings, *, now: float | None = None) -> int:
    """Fade every Hebbian edge by the days since the previous pass; returns the edges dropped."""
    now = db.now() if now is None else now
    with db.transaction():
        last = db.scalar("SELECT value FROM meta WHERE key = ?", (DECAY_META_KEY,))
        days = 0.0 if last is None else (now - float(last)) / SECONDS_PER_DAY
        dropped = 0
        if days > 0:
            factor = decayed_weight(1.0, days, settings.decay_per_day)
            dropped = edges.decay_hebbian(db, factor, settings.min_edge_weight)
        db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                   (DECAY_META_KEY, repr(float(now))))
    return dropped
