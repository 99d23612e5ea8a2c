"""Recall's blend learnt from the user's own signals: vetoes, pins and thumbs on the replies recall fed.

Recall ranks a memory by a fixed blend of its terms (core.memory.scoring). Five of them are per-item and say *why*
the memory came up: meaning (calibrated vector similarity), shared words (its share of the best BM25 match),
link (the share of its relevance lent by a strong graph edge), recency and importance. What the user does with a
reply's memories is a label on those terms, taken with the values the memory had when the reply was made (stored
with the reply, `snapshot` / `remember_reply`):

- a veto (a chip removed) says "rank this lower" (y = 0), a pin of a memory a recent reply used "rank it higher"
  (y = 1), each counting 1;
- a thumbs up or down says the same, mildly (RATING_WEIGHT), of every memory the reply kept: a thumb rates the
  whole reply — the model's wording as much as what recall brought — so no single memory earns a full label.

A label is about a memory *against the others recall offered*, so the terms are centred: on the mean of the
memories that recall returned for that reply (veto, pin), or on the typical recalled memory of the latest replies
(a thumb rates all the reply's memories at once). A veto of a memory like its reply-mates then teaches nothing;
one of a memory that came by shared words alone lowers the weight of shared words. The learner is the regularised
logistic update with AdaGrad of core.memory.learned (core.memory.online_logistic), with weights w (one per term)
that start at 0 and are pulled back to 0: recall multiplies a memory's score by exp(w·(x − x̄)), x̄ the mean over
that query's memory candidates (so memories keep their place against conversation turns), at most ×2 or ×½
(MAX_FACTOR). Until the first signal w is 0 and recall is exactly the preset's. Never a pinned, protected,
permanent or critical memory is ranked lower by what was learnt (its factor is at least 1), and a veto or a thumbs
down is not learnt from it.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Mapping, Sequence, TypeGuard

import numpy as np

from core.config import Settings
from core.memory import online_logistic as ol
from core.memory import scoring
from core.store.db import Database
from core.words import counted

META_KEY = "learned_recall"
TERMS = ("meaning", "words", "link", "recency", "importance")
LABELS = ("meaning", "shared words", "links", "recency", "importance")
BOUND = 1.0  # each weight within ±BOUND: a memory strongest in a term against one without it, ×e at most
MAX_FACTOR = 2.0  # whatever the weights and terms, recall's score moves at most ×2 or ×½
SIZE = ol.StepSize(rate=0.1, epsilon=0.1, pull=0.02)  # one veto moves a score by ~7%, a dozen that agree by ~40%
RATING_WEIGHT = 0.25  # a thumb rates the whole reply, not each memory in it
PIN_WINDOW_DAYS = 7.0  # a pin speaks for the recall of a reply made this shortly before it
TYPICAL_REPLIES = 100  # the replies whose recalled memories make "the typical one" a thumb is measured against
MAX_STORED = 24  # a reply keeps the terms of at most this many memories (a re-answer adds its own)
SECONDS_PER_DAY = 86400.0
_ZERO = np.zeros(len(TERMS))


@dataclass(frozen=True)
class RecallBlend:
    weights: tuple[float, ...] = (0.0,) * len(TERMS)
    vetoes: int = 0
    pins: int = 0
    rated_up: int = 0
    rated_down: int = 0
    squared: tuple[float, ...] = (0.0,) * len(TERMS)  # AdaGrad: each weight's sum of squared signal gradients
    pins_seen: int = 0  # the last memory_history row a pin was looked for in

    @property
    def signals(self) -> int:
        return self.vetoes + self.pins + self.rated_up + self.rated_down

    @property
    def active(self) -> bool:
        return any(w != 0.0 for w in self.weights)

    def vector(self) -> np.ndarray:
        return np.array(self.weights, dtype=np.float64)


# -- the terms of a recalled memory ------------------------------------------------------------------------------

def terms(breakdown: Mapping[str, float], weights: scoring.ScoringWeights) -> tuple[float, ...]:
    """A memory's five terms in [0, 1], from recall's breakdown of its score (core.memory.recall._rescore)."""
    return tuple(round(float(v), 3) for v in _term_matrix([breakdown], weights)[0])


def _term_matrix(breakdowns: Sequence[Mapping[str, float]], weights: scoring.ScoringWeights) -> np.ndarray:
    """One row of terms a memory, computed a column at a time (recall calls this for every memory candidate)."""
    raw = ol.finite(np.array([[b.get(key, 0.0) for key in ("similarity", "own", "graph", "relevance", "recency",
                                                           "importance")] for b in breakdowns], dtype=np.float64),
                    0.0, 1e6)  # a damaged value is held to a finite range
    meaning, own, graph, relevance, recency, importance = raw.T
    v, w = weights.vector_weight, weights.bm25_weight
    words = ((v + w) * own - v * meaning) / w if w > 0 else np.zeros(len(raw))  # the fused score, undone
    link = np.divide(graph, relevance, out=np.zeros(len(raw)), where=relevance > 0)
    fresh = recency / weights.recency_cap if weights.recency_cap > 0 else np.zeros(len(raw))
    return ol.finite(np.column_stack([meaning, words, link, fresh, importance]), 0.0, 1.0)


def shielded(row: Mapping[str, Any]) -> bool:
    """Pinned, protected, permanent or critical: what was learnt never ranks it lower."""
    return any(bool(row.get(flag)) for flag in ("pinned", "protected", "permanent", "critical"))


def factors(blend: RecallBlend, breakdowns: Sequence[Mapping[str, float]], rows: Sequence[Mapping[str, Any]],
            weights: scoring.ScoringWeights) -> np.ndarray:
    """Each memory candidate's multiplier: exp(w·(x − x̄)) within [½, 2], and never below 1 when shielded."""
    if not breakdowns:
        return np.ones(0)
    x = _term_matrix(breakdowns, weights)
    z = np.clip((x - x.mean(axis=0)) @ blend.vector(), -math.log(MAX_FACTOR), math.log(MAX_FACTOR))
    result = np.exp(z)
    for i in np.flatnonzero(result < 1.0):
        if shielded(rows[int(i)]):
            result[i] = 1.0
    return result


# -- what a reply keeps of its recall ----------------------------------------------------------------------------

def snapshot(hits: Iterable[Any], used: Iterable[int], settings: Settings) -> dict[str, Any] | None:
    """The terms of the memories a reply used and the mean over all the memories recall returned for it (hits:
    recall's RecallHit); None when recall returned no memory."""
    memories = [h for h in hits if h.kind == "memory"]
    if not memories:
        return None
    x = _term_matrix([h.breakdown for h in memories], scoring.preset(settings.recall.preset))
    found = {int(h.id): [round(float(v), 3) for v in row] for h, row in zip(memories, x)}
    reference = x.mean(axis=0)
    kept = {str(i): found[i] for i in used if i in found}
    return {"features": dict(list(kept.items())[:MAX_STORED]), "reference": [round(float(v), 3) for v in reference]}


def remember_reply(db: Database, episode_id: int, taken: Mapping[str, Any] | None) -> None:
    """Store a reply's snapshot in its episode's metadata ("recall"); a re-answer adds its memories' terms to the
    first answer's (a veto is learnt with the terms of the answer it was made on), at most MAX_STORED."""
    if not taken:
        return
    metadata = json.loads(db.scalar("SELECT metadata FROM episodes WHERE id = ?", (int(episode_id),)) or "{}")
    earlier = _snapshot_of(metadata) or {"features": {}}
    features = {**taken["features"], **{k: v for k, v in earlier["features"].items() if k not in taken["features"]}}
    metadata["recall"] = {"features": dict(list(features.items())[:MAX_STORED]), "reference": taken["reference"]}
    db.execute("UPDATE episodes SET metadata = ? WHERE id = ?",
               (json.dumps(metadata, ensure_ascii=False), int(episode_id)))


def _stored(db: Database, episode_id: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    raw = db.scalar("SELECT metadata FROM episodes WHERE id = ?", (int(episode_id),))
    try:
        metadata = json.loads(raw or "{}")
    except ValueError:
        return {}, None
    return (metadata, _snapshot_of(metadata)) if isinstance(metadata, dict) else ({}, None)


def _snapshot_of(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stored snapshot, checked: a damaged or hand-edited one teaches nothing."""
    taken = metadata.get("recall")
    if not isinstance(taken, dict) or not _is_terms(taken.get("reference")):
        return None
    features = taken.get("features")
    if not isinstance(features, dict):
        return None
    return {"features": {k: v for k, v in features.items() if k.isdigit() and _is_terms(v)},
            "reference": taken["reference"]}


def _json(text: object) -> object:
    try:
        return json.loads(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None  # a hand-edited value is no reference


def _is_terms(value: object) -> TypeGuard[list[float]]:
    return (isinstance(value, list) and len(value) == len(TERMS)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value))


# -- the user's signals ------------------------------------------------------------------------------------------

def learn_veto(db: Database, settings: Settings, episode_id: int, memory_id: int) -> bool:
    """A memory removed from a reply: rank memories like it lower. False when nothing was learnt."""
    if not settings.recall.learn or _is_shielded(db, memory_id):
        return False
    taken = _stored(db, episode_id)[1]
    x = taken["features"].get(str(int(memory_id))) if taken else None
    if not taken or not x:
        return False
    _learn(db, [(np.array(x) - np.array(taken["reference"]), 0.0, 1.0)], vetoes=1)
    return True


def learn_rating(db: Database, settings: Settings, episode_id: int, rating: int | None) -> int:
    """A thumb on a reply: mildly, its kept memories were (up) or were not (down) the ones to bring. A reply's
    thumb is learnt once per direction. Returns how many memories it was learnt of."""
    metadata, taken = _stored(db, episode_id)
    if not settings.recall.learn or rating not in (1, -1) or taken is None or metadata.get("recall_rated") == rating:
        return 0
    vetoed = {r[0] for r in db.execute("SELECT memory_id FROM reply_memories WHERE episode_id = ? AND vetoed_at "
                                       "IS NOT NULL", (int(episode_id),))}
    ids = [int(k) for k in taken["features"] if int(k) not in vetoed]
    if rating == -1:
        ids = [i for i in ids if not _is_shielded(db, i)]
    typical = _typical(db)
    signals = [(np.array(taken["features"][str(i)]) - typical, float(rating == 1), RATING_WEIGHT) for i in ids]
    db.execute("UPDATE episodes SET metadata = json_set(metadata, '$.recall_rated', ?) WHERE id = ?",
               (rating, int(episode_id)))
    if signals:
        _learn(db, signals, **{"rated_up" if rating == 1 else "rated_down": 1})
    return len(signals)


def collect_pins(db: Database, settings: Settings) -> int:
    """Pins made since the last look (memory_history): each pinned memory that a reply used within
    PIN_WINDOW_DAYS before the pin says that recall was right to bring it. Returns how many were learnt."""
    if not settings.recall.learn or not db.scalar("SELECT 1 FROM memory_history WHERE action = 'pin' AND id > ? "
                                                  "LIMIT 1", (load(db).pins_seen,)):
        return 0  # nothing new: no write (Settings asks each time it is shown)
    with db.transaction():
        blend = load(db)
        pins = db.query("SELECT id, memory_id, at FROM memory_history WHERE action = 'pin' AND id > ? ORDER BY id",
                        (blend.pins_seen,))
        if not pins:
            return 0
        signals = [s for s in (_pin_signal(db, p["memory_id"], p["at"]) for p in pins) if s is not None]
        blend = _learn(db, signals, pins=len(signals)) if signals else blend
        save(db, replace(blend, pins_seen=int(pins[-1]["id"])))
    return len(signals)


def _pin_signal(db: Database, memory_id: int, at: float) -> tuple[np.ndarray, float, float] | None:
    replies = db.execute(
        "SELECT e.id FROM reply_memories r JOIN episodes e ON e.id = r.episode_id WHERE r.memory_id = ? AND "
        "r.vetoed_at IS NULL AND e.created_at BETWEEN ? AND ? ORDER BY e.created_at DESC, e.id DESC LIMIT 5",
        (int(memory_id), at - PIN_WINDOW_DAYS * SECONDS_PER_DAY, at))
    for (episode_id,) in list(replies):
        taken = _stored(db, episode_id)[1]
        x = taken["features"].get(str(int(memory_id))) if taken else None
        if taken and x:
            return np.array(x) - np.array(taken["reference"]), 1.0, 1.0
    return None


def _is_shielded(db: Database, memory_id: int) -> bool:
    row = db.query_one("SELECT pinned, protected, permanent, critical FROM memories WHERE id = ?", (int(memory_id),))
    return row is None or shielded(row)  # a memory gone since teaches nothing either


def _typical(db: Database) -> np.ndarray:
    """The mean of the latest replies' recall references: what a recalled memory is usually like."""
    rows = db.execute("SELECT json_extract(metadata, '$.recall.reference') FROM episodes WHERE "
                      "json_extract(metadata, '$.recall.reference') IS NOT NULL ORDER BY id DESC LIMIT ?",
                      (TYPICAL_REPLIES,))
    found = [v for v in (_json(r[0]) for r in rows) if _is_terms(v)]
    return np.mean(np.array(found), axis=0) if found else _ZERO


def updated(blend: RecallBlend, signals: Sequence[tuple[np.ndarray, float, float]], **counts: int) -> RecallBlend:
    """The blend after labelled signals: (centred terms, y 1 or 0, how much it counts); `counts` adds to the
    record's tallies (vetoes=1, ...)."""
    w, squared = blend.vector(), np.array(blend.squared)
    low, high = np.full(len(TERMS), -BOUND), np.full(len(TERMS), BOUND)
    for x, y, weight in signals:
        w, squared = ol.step(w, squared, ol.finite(x), y, anchor=_ZERO, size=SIZE, weight=weight)
        w = ol.clipped(w, low, high)
    return replace(blend, weights=tuple(float(v) for v in w), squared=tuple(float(v) for v in squared),
                   **{name: getattr(blend, name) + n for name, n in counts.items()})


def _learn(db: Database, signals: Sequence[tuple[np.ndarray, float, float]], **counts: int) -> RecallBlend:
    learnt = updated(load(db), signals, **counts)
    save(db, learnt)
    return learnt


# -- the record, and what the user sees --------------------------------------------------------------------------

def load(db: Database) -> RecallBlend:
    raw = db.scalar("SELECT value FROM meta WHERE key = ?", (META_KEY,))
    if not raw:
        return RecallBlend()
    try:
        return _parsed(json.loads(raw))
    except (TypeError, ValueError):
        return RecallBlend()  # a damaged record starts over rather than breaking recall


def _parsed(record: object) -> RecallBlend:
    if not isinstance(record, dict):
        raise ValueError("the learnt recall blend must be a JSON object")
    counts = {name: record.get(name, 0) for name in ("vetoes", "pins", "rated_up", "rated_down", "pins_seen")}
    if not all(type(c) is int and c >= 0 for c in counts.values()):
        raise ValueError("the learnt recall blend's counts are damaged")
    weights, squared = record.get("weights"), record.get("squared")
    if not (_is_terms(weights) and _is_terms(squared) and all(v >= 0 for v in squared)):
        raise ValueError("the learnt recall blend's weights are damaged")
    w = ol.clipped(np.array(weights, dtype=np.float64), np.full(len(TERMS), -BOUND), np.full(len(TERMS), BOUND))
    return RecallBlend(tuple(float(v) for v in w), squared=tuple(float(v) for v in squared), **counts)


def save(db: Database, blend: RecallBlend) -> None:
    record = asdict(blend) | {"weights": list(blend.weights), "squared": list(blend.squared)}
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
               (META_KEY, json.dumps(record)))


def reset(db: Database) -> None:
    """Back to the preset's blend; pins made before the reset are not learnt again."""
    with db.transaction():
        seen = db.scalar("SELECT max(id) FROM memory_history") or 0
        save(db, RecallBlend(pins_seen=int(seen)))


def effective(db: Database, settings: Settings) -> RecallBlend | None:
    """The blend recall should use: None (the preset's, untouched) when learning is off or nothing moved."""
    if not settings.recall.learn:
        return None
    blend = load(db)
    return blend if blend.active else None


def describe(db: Database, settings: Settings) -> str:
    """One line for the user: what recall learnt, from how many signals."""
    if not settings.recall.learn:
        return "Learning is off (recall.learn): recall ranks memories with its preset's blend."
    blend = load(db)
    if blend.signals == 0:
        return ("Nothing learnt yet: recall uses its preset's blend until you remove, pin or rate what it brought "
                "to a reply.")
    counts = [counted(n, word, many) for n, word, many in (
        (blend.vetoes, "memory removed", "memories removed"), (blend.pins, "pin", None),
        (blend.rated_up, "thumbs up", "thumbs up"), (blend.rated_down, "thumbs down", "thumbs down")) if n]
    terms_ = ", ".join(f"{label} ×{math.exp(w):.2f}" for label, w in zip(LABELS, blend.weights))
    return (f"Learnt from {', '.join(counts)}: {terms_} (what a memory strongest in that term gains against one "
            f"without it, ×1.00 by default; never below ×1 for pinned, protected or critical memories).")


# What each term means to a person, for Settings (the exact factors stay in `engram recall-weights`).
PLAIN_TERMS = ("memories close in meaning to your message", "memories sharing words with your message",
               "memories linked to ones that helped", "recent memories", "important memories")
NOTICEABLE = 0.05  # a factor within 5 % of ×1 is "as before"


def describe_plainly(db: Database, settings: Settings) -> str:
    """describe() in a person's words: what recall now favours more or less, without factors and term names."""
    text = describe(db, settings)
    blend = load(db)
    if not settings.recall.learn or blend.signals == 0:
        return text
    learnt_from = text.split(":", 1)[0]
    more = [t for t, w in zip(PLAIN_TERMS, blend.weights) if math.exp(w) > 1 + NOTICEABLE]
    less = [t for t, w in zip(PLAIN_TERMS, blend.weights) if math.exp(w) < 1 - NOTICEABLE]
    parts = ([f"it now brings up {' and '.join(more)} more readily"] if more else []) + (
        [f"{' and '.join(less)} less readily"] if less else [])
    return f"{learnt_from}: " + ("; ".join(parts) if parts else "nothing changed noticeably yet") + (
        ". Pinned, protected and critical memories are never ranked lower for it.")
