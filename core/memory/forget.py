"""Forgetting (seed 001, with KenLM's forgetting-as-summarisation): score, preview, forget, undo.

Retention of an item (a memory or an episode) is a probability from its recency, relevance, importance and what
the user's own signals say about items like it (core.memory.retention, re-exported here). An item is forgotten when
P < threshold (scaled by Settings.forgetting.strength). Never forgotten: pinned, protected, permanent or critical
memories, protected episodes, anything younger than min_age_days, and a summary that holds forgotten episodes.
The API (helper D2's timeline panel and the CLI build on it):

- `score_store(db, settings)` → ScoreTable: every eligible item's terms and retention.
- `preview(db, settings)` → list[Scored]: what would go if a pass ran now, lowest retention first, each with
  the score that caused it (`Scored.reason`).
- `project(scored, settings, days)` / `forgetting_curves(db, settings, ...)`: retention over future days if
  the item is not used again (recency keeps halving, importance fades at importance_decay_per_day), and the
  day it would cross the threshold — the forgetting curves the timeline draws.
- `forgetting_pass(db, settings, embedder=None)` → PassResult: below-threshold facts are archived
  (forgotten_at set, a 'forget' history row); below-threshold episodes are compacted, grouped by session,
  into one summary memory each (kind 'summary', linked to its episodes) that keeps the statements of the
  facts drawn from them and a short excerpt of what the user said (core.memory.compaction). Every forgetting writes a
  forgetting_events row with its retention and reason.
- `undo(db, event_id)`: restores the item (until it is purged); the undo counts as a use, so the next pass
  does not take it straight back, and the next pass learns from it (`learn_from_signals`, core.memory.learned
  for the weights, core.memory.preference for what the restores, silences and uses say about content).
- `list_events(db)`: the log, newest first.

B1's bench/turn.py times `forgetting_pass` (and core.memory.consolidate.consolidation_pass) at 100k memories.
"""
from __future__ import annotations

import time as _time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from core.config import Settings
from core.errors import InvalidInput, NotFound
from core.memory import compaction, learned
from core.memory import preference as pref
from core.memory import relevance as rel
from core.memory.index import repair_missing_vectors
from core.memory.retention import (Scored, ScoreTable, half_life, recency_score, rescored,  # noqa: F401 (API)
                                   retention_probability, score, score_store, threshold)
from core.protocols import Embedder
from core.store import history
from core.store.db import Database
from core.store.memories import get_memory, snapshot

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class ForgettingEvent:
    id: int
    item_type: str
    item_id: int
    action: str  # archive / compact
    retention: float
    reason: str
    summary_id: int | None
    at: float
    restored_at: float | None


@dataclass(frozen=True)
class PassResult:
    archived: tuple[int, ...]  # memory ids
    compacted: tuple[int, ...]  # episode ids
    summaries: tuple[int, ...]  # summary memories written by this pass
    events: tuple[int, ...]
    scored: int  # eligible items looked at
    seconds: float


# -- what would go -------------------------------------------------------------------------------------
def preview(db: Database, settings: Settings, *, now: float | None = None) -> list[Scored]:
    """What a pass would forget if it ran now, lowest retention first."""
    tables = score_store(db, settings, now=now)
    limit = threshold(settings)
    return sorted(tables["memory"].below(limit) + tables["episode"].below(limit), key=lambda s: s.retention)


def preview_top(db: Database, settings: Settings, limit: int, *,
                now: float | None = None) -> tuple[list[Scored], int]:
    """The first `limit` items of `preview` and how many it holds in all, without making the rest (at 100k items,
    `forget --preview` made 82k to print 20)."""
    tables = score_store(db, settings, now=now)
    cut = threshold(settings)
    below = [(table, table.positions_below(cut)) for table in (tables["memory"], tables["episode"])]
    retention = np.concatenate([table.retention[at] for table, at in below])
    first = np.argsort(retention, kind="stable")[:max(limit, 0)]  # ties as preview's stable sort leaves them
    memories = len(below[0][1])

    def item(n: int) -> Scored:  # n counts the memories below the threshold, then the episodes
        table, at = below[0] if n < memories else below[1]
        return table.rows([at[n if n < memories else n - memories]])[0]
    return [item(n) for n in first.tolist()], len(retention)


# -- projection --------------------------------------------------------------------------------------------
def project(scored: Scored, settings: Settings, days: Sequence[float]) -> list[float]:
    """Retention on each future day if the item is not used again (the forgetting curve)."""
    ahead = np.asarray(days, dtype=np.float64)
    recency = recency_score(scored.age_days + ahead, half_life(scored.item_type, settings))
    importance = scored.importance * (1.0 - settings.hebbian.importance_decay_per_day) ** np.maximum(ahead, 0)
    return [float(p) for p in retention_probability(recency, scored.relevance, importance, settings)]


def days_until_forgotten(scored: Scored, settings: Settings, horizon_days: int = 365) -> float | None:
    """The first whole day from now on which retention falls below the threshold (None: not within horizon)."""
    curve = project(scored, settings, range(horizon_days + 1))
    limit = threshold(settings)
    return next((float(d) for d, p in enumerate(curve) if p < limit), None)


def forgetting_curves(db: Database, settings: Settings, *, days: Sequence[float] = tuple(range(0, 91, 3)),
                      limit: int = 50, now: float | None = None) -> list[tuple[Scored, list[float]]]:
    """The curves of the `limit` items closest to being forgotten (lowest retention now)."""
    tables = score_store(db, settings, now=now)
    items = sorted((t.row(n) for t in tables.values() for n in np.argsort(t.retention)[:limit]),
                   key=lambda s: s.retention)[:limit]
    return [(item, project(item, settings, days)) for item in items]


# -- the pass ----------------------------------------------------------------------------------------------
def forgetting_pass(db: Database, settings: Settings, *, embedder: Embedder | None = None,
                    now: float | None = None) -> PassResult:
    """Forget everything below the threshold now: archive facts, compact episodes into summaries."""
    started = _time.perf_counter()
    now = db.now() if now is None else now
    ctx = rel.context(db, settings, now)
    labels = pref.labels(db, now) if settings.forgetting.learn else None
    tables = score(db, settings, now, ctx, labels)
    if learn_from_signals(db, settings, now, tables, ctx, labels):  # this pass already forgets with what was learnt
        tables = rescored(tables, learned.effective(db, settings), learned.load(db, settings).delta)
    _penalise_size(db, settings, tables)
    limit = threshold(settings)
    doomed_memories = tables["memory"].below(limit)
    doomed_episodes = tables["episode"].below(limit)
    with db.transaction():
        events = [archive_memory(db, s, s.reason(limit), now) for s in doomed_memories]
        summaries, compact_events = compact_episodes(db, doomed_episodes, limit, now)
    if embedder is not None:  # the new summaries, and any row a kill between two commits left without a vector
        repair_missing_vectors(db, embedder)
    return PassResult(tuple(s.item_id for s in doomed_memories), tuple(s.item_id for s in doomed_episodes),
                      tuple(summaries), tuple(events + compact_events),
                      sum(len(t.ids) for t in tables.values()), _time.perf_counter() - started)


def _penalise_size(db: Database, settings: Settings, tables: dict[str, ScoreTable]) -> None:
    """The store-size term of the learnt weights: every pass leans them a little towards forgetting."""
    if not settings.forgetting.learn:
        return
    terms = np.concatenate([t.terms() for t in tables.values()])
    with db.transaction():
        learned.save(db, learned.size_step(learned.load(db, settings), terms, settings))


def archive_memory(db: Database, scored: Scored, reason: str, now: float) -> int:
    before = get_memory(db, scored.item_id)
    db.execute("UPDATE memories SET forgotten_at = ? WHERE id = ?", (now, before.id))
    history.record(db, before.id, "forget", snapshot(before), {**snapshot(before), "forgotten_at": now},
                   reason, at=now)
    return _log(db, "memory", before.id, "archive", scored, reason, None, now)


def compact_episodes(db: Database, doomed: Sequence[Scored], limit: float, now: float) -> tuple[list[int], list[int]]:
    """Each session's forgettable turns share one summary that keeps their facts (an existing
    consolidation summary is reused); every turn gets its forgetting event."""
    by_id = {s.item_id: s for s in doomed}
    summaries, events = [], []
    for rows in compaction.episode_groups(db, list(by_id)):
        fresh = [r for r in rows if r["summary_id"] is None]
        new_summary = compaction.write_summary(db, fresh, now) if fresh else None
        if new_summary is not None:
            summaries.append(new_summary)
        for existing in {r["summary_id"] for r in rows if r["summary_id"] is not None}:
            compaction.unarchive_summary(db, existing, now)
        for row in rows:
            summary_id = row["summary_id"] if row["summary_id"] is not None else new_summary
            db.execute("UPDATE episodes SET forgotten_at = ?, summary_id = ? WHERE id = ?",
                       (now, summary_id, row["id"]))
            scored = by_id[row["id"]]
            events.append(_log(db, "episode", row["id"], "compact", scored, scored.reason(limit), summary_id, now))
    return summaries, events


# -- log and undo ------------------------------------------------------------------------------------------
def _log(db: Database, item_type: str, item_id: int, action: str, scored: Scored, reason: str,
         summary_id: int | None, now: float) -> int:
    """The event keeps the three terms the item was scored with: the user's restore, or silence, teaches the
    weights from them (core.memory.learned)."""
    db.execute("INSERT INTO forgetting_events(item_type, item_id, action, retention, reason, summary_id, at, "
               "recency, relevance, importance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (item_type, int(item_id), action, float(scored.retention), reason, summary_id, now,
                float(scored.recency), float(scored.relevance), float(scored.importance)))
    return int(db.conn.last_insert_rowid())


def learn_from_signals(db: Database, settings: Settings, now: float, tables: dict[str, ScoreTable],
                       ctx: rel.Context, labels: pref.Labels | None = None) -> int:
    """What the user did with forgetting since the last pass teaches the weights (core.memory.learned): each
    restore says 'keep things like this'; a forgetting left alone for learned.SILENCE_DAYS says it was right
    (weakly, and only once the user has restored something: before that, silence says nothing about them).
    An item is learnt from with the recency and importance it was forgotten with, and its relevance now: how
    close it is to the conversation and to the other things the user asked back, and its preference now (the
    vote of the other labelled items near it), which is what the signal is about. A restore counts even after its
    silence did (the restore outweighs it)."""
    if not settings.forgetting.learn:
        return 0
    rows = db.query("SELECT id, item_type, item_id, recency, relevance, importance, restored_at FROM forgetting_events "
                    "WHERE recency IS NOT NULL AND learned_at IS NULL AND (restored_at IS NOT NULL OR at <= ?) "
                    "ORDER BY id",
                    (now - learned.SILENCE_DAYS * SECONDS_PER_DAY,))
    if not rows:
        return 0
    weights = learned.load(db, settings)
    engaged = weights.kept_signals > 0 or any(r["restored_at"] is not None for r in rows)
    preference = _preference_now(db, rows, labels)
    signals = [((row["recency"], _relevance_now(db, row, tables, ctx), row["importance"], liked),
                row["restored_at"] is not None) for row, liked in zip(rows, preference)
               if engaged or row["restored_at"] is not None]
    weights = learned.batch_step(weights, [t for t, _ in signals], [k for _, k in signals], settings)
    with db.transaction():
        learned.save(db, weights)
        db.conn.executemany("UPDATE forgetting_events SET learned_at = ? WHERE id = ?", [(now, r["id"]) for r in rows])
    return len(rows)


def _relevance_now(db: Database, row: dict, tables: dict[str, ScoreTable], ctx: rel.Context) -> float:
    """The item's relevance against this pass's reference points, leaving itself out of the restores."""
    kind, item = row["item_type"], int(row["item_id"])
    table = tables.get(kind)
    points = ctx.points(leave_out=(kind, item))
    if table is None or table.reference is None or points is None:
        return float(row["relevance"])
    cosine = ctx.grouped(rel.cosines(db, kind, np.array([item]), points))
    if np.isnan(cosine).any():
        return float(row["relevance"])
    return float(rel.relevance(cosine, table.reference[:, :cosine.shape[1]])[0])


def _preference_now(db: Database, rows: list[dict], labels: pref.Labels | None) -> list[float]:
    """Each signalled item's preference by the other labelled items (itself left out)."""
    found: dict[tuple[str, int], float] = {}
    for kind in ("memory", "episode"):
        ids = np.array(sorted({int(r["item_id"]) for r in rows if r["item_type"] == kind}), dtype=np.int64)
        found.update({(kind, int(i)): float(v) for i, v in zip(ids, pref.of_items(db, labels, kind, ids))})
    return [found[(r["item_type"], int(r["item_id"]))] for r in rows]


def list_events(db: Database, *, limit: int = 200, include_restored: bool = True) -> list[ForgettingEvent]:
    where = "" if include_restored else "WHERE restored_at IS NULL"
    return [_event(r) for r in db.query(f"SELECT * FROM forgetting_events {where} ORDER BY at DESC, id DESC LIMIT ?",
                                        (int(limit),))]


def get_event(db: Database, event_id: int) -> ForgettingEvent:
    row = db.query_one("SELECT * FROM forgetting_events WHERE id = ?", (_int(event_id),))
    if row is None:
        raise NotFound(f"no forgetting event with id {event_id}")
    return _event(row)


def undo(db: Database, event_id: int) -> ForgettingEvent:
    """Bring the item back (its summary stays); refused once the item was purged or already restored. The undo
    counts as a use, and is a signal the retention weights learn from at the next pass (learn_from_signals)."""
    event = get_event(db, event_id)
    if event.restored_at is not None:
        raise InvalidInput(f"forgetting event {event.id} was already undone")
    table = "memories" if event.item_type == "memory" else "episodes"
    row = db.query_one(f"SELECT forgotten_at, deleted_at FROM {table} WHERE id = ?", (event.item_id,))
    if row is None:
        raise NotFound(f"{event.item_type} {event.item_id} was purged; forgetting event {event.id} cannot be undone")
    now = db.now()
    with db.transaction():
        if row["forgotten_at"] is not None:
            before = get_memory(db, event.item_id) if event.item_type == "memory" else None
            # the undo counts as a use, so the next pass does not forget it again straight away
            db.execute(f"UPDATE {table} SET forgotten_at = NULL, last_access = ?, access_count = access_count + 1 "
                       "WHERE id = ?", (now, event.item_id))
            if before is not None:
                history.record(db, before.id, "restore", snapshot(before), snapshot(get_memory(db, before.id)),
                               f"undo of forgetting event {event.id}", at=now)
        # a new signal, even if its silence was counted already (learned_at: the next pass learns from it)
        db.execute("UPDATE forgetting_events SET restored_at = ?, learned_at = NULL WHERE id = ?", (now, event.id))
    return get_event(db, event.id)


def _event(row: dict) -> ForgettingEvent:
    return ForgettingEvent(id=row["id"], item_type=row["item_type"], item_id=row["item_id"], action=row["action"],
                           retention=row["retention"], reason=row["reason"], summary_id=row["summary_id"],
                           at=row["at"], restored_at=row["restored_at"])


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise InvalidInput(f"expected an id, not {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"expected a numeric id, not {value!r}") from None

