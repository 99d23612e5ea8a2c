"""Retention scores (seed 001): how likely each item that may be forgotten is worth keeping.

    P = 1 / (1 + exp(−(α·recency + β·relevance + γ·importance + δ·preference + bias)))

- recency = 2^(−days since last use / half-life), last use = last access or creation; the half-life is
  recency_half_life_days for a conversation turn and fact_half_life_factor times that for a fact;
- relevance = how much closer than the median item the item is to what the user cares about lately: the
  centroid of the newest `context_episodes` episodes, or the nearest item the user restored (core.memory.relevance),
  in [0, 1];
- importance = core.memory.importance: PageRank share + log(1 + access count) + evidence for a hypothesis
  (for a memory, the larger of its stored importance and today's earned score) + freshness;
- preference = what the user's restores, silences and the memories their replies used say about items like this
  one (core.memory.preference), as log-odds within ±3, 0 without such signals; only while forgetting learns
  (with learning off δ·preference is 0).

α, β, γ, δ and the bias are learnt from the user's signals when learning is on (core.memory.learned). Never
scored at all: pinned, protected, permanent or critical memories, protected episodes, anything younger than
min_age_days, and a summary that holds forgotten episodes. core.memory.forget forgets below the threshold.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from core.config import Settings
from core.memory import importance as imp
from core.memory import learned
from core.memory import preference as pref
from core.memory import relevance as rel
from core.store.db import Database

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class Scored:
    """One item's retention and the terms that made it."""

    item_type: str  # memory / episode
    item_id: int
    recency: float
    relevance: float
    importance: float
    retention: float
    age_days: float  # days since last use
    preference: float = 0.0  # what the user's signals say about items like it (0: nothing)

    def reason(self, threshold: float) -> str:
        liked = f", like what you restored {self.preference:+.2f}" if abs(self.preference) >= 0.005 else ""
        return (f"retention {self.retention:.3f} below {threshold:.3f} (recency {self.recency:.2f}, "
                f"relevance {self.relevance:.2f}, importance {self.importance:.2f}{liked})")


@dataclass(frozen=True)
class ScoreTable:
    """Column arrays for all eligible items of one kind (fast at 100k rows)."""

    item_type: str
    ids: np.ndarray
    age_days: np.ndarray
    recency: np.ndarray
    relevance: np.ndarray
    importance: np.ndarray
    retention: np.ndarray
    reference: np.ndarray | None = None  # sorted cosines to each reference point: what relevance is measured by
    preference: np.ndarray | None = None  # None: no labels to vote with (all 0)

    def preferences(self) -> np.ndarray:
        return np.zeros(len(self.ids)) if self.preference is None else self.preference

    def row(self, n: int) -> Scored:
        return self.rows([n])[0]

    def rows(self, positions: Sequence[int] | np.ndarray) -> list[Scored]:
        """The items at `positions` (indexes into the columns), in that order; the columns are converted to Python
        numbers once, not item by item (`forget --preview` at 100k memories spent 2.4 s CPU making a zeros array
        per item)."""
        at = np.asarray(positions, dtype=np.int64)
        preference = np.zeros(len(at)) if self.preference is None else self.preference[at]
        columns = zip(self.ids[at].tolist(), self.recency[at].tolist(), self.relevance[at].tolist(),
                      self.importance[at].tolist(), self.retention[at].tolist(), self.age_days[at].tolist(),
                      preference.tolist())
        return [Scored(self.item_type, int(i), *terms) for i, *terms in columns]

    def below(self, threshold: float) -> list[Scored]:
        return self.rows(self.positions_below(threshold))

    def positions_below(self, threshold: float) -> np.ndarray:
        """The positions of the items below `threshold`, lowest retention first (ties in column order)."""
        order = np.argsort(self.retention, kind="stable")
        return order[self.retention[order] < threshold]

    def terms(self) -> np.ndarray:
        """Rows of (recency, relevance, importance, preference): what the learnt weights multiply."""
        return np.column_stack([self.recency, self.relevance, self.importance, self.preferences()])


def threshold(settings: Settings) -> float:
    """The forgetting threshold τ, scaled by the user's strength dial."""
    return settings.forgetting.effective_threshold()


def recency_score(days_since_use: np.ndarray | float, half_life_days: float) -> np.ndarray:
    """001: 2^(−days / half-life): 1 just used, ½ after one half-life."""
    return np.power(0.5, np.maximum(days_since_use, 0.0) / max(half_life_days, 1e-9))


def half_life(item_type: str, settings: Settings) -> float:
    """Facts fade slower than the turns they came from (fact_half_life_factor x the episodes' half-life)."""
    f = settings.forgetting
    return f.recency_half_life_days * (f.fact_half_life_factor if item_type == "memory" else 1.0)


def retention_probability(recency: np.ndarray | float, relevance: np.ndarray | float,
                          importance: np.ndarray | float, settings: Settings, *,
                          preference: np.ndarray | float = 0.0, delta: float = 0.0) -> np.ndarray:
    """001: P = σ(α·recency + β·relevance + γ·importance + bias), plus δ·preference when forgetting learns."""
    f = settings.forgetting
    logit = f.alpha * np.asarray(recency) + f.beta * np.asarray(relevance) + f.gamma * np.asarray(importance)
    return 1.0 / (1.0 + np.exp(-(logit + delta * np.asarray(preference) + f.bias)))


def content_weight(db: Database, settings: Settings) -> float:
    """δ: the learnt weight of preference, 0 while learning is off."""
    return learned.load(db, settings).delta if settings.forgetting.learn else 0.0


def score_store(db: Database, settings: Settings, *, now: float | None = None) -> dict[str, ScoreTable]:
    """Retention of every item that may be forgotten, as {'memory': table, 'episode': table}, with the weights
    learnt from the user's signals (core.memory.learned) when learning is on."""
    now = db.now() if now is None else now
    labels = pref.labels(db, now) if settings.forgetting.learn else None
    return score(db, settings, now, rel.context(db, settings, now), labels)


def score(db: Database, settings: Settings, now: float, ctx: rel.Context,
          labels: pref.Labels | None) -> dict[str, ScoreTable]:
    delta = content_weight(db, settings)
    settings = learned.effective(db, settings)
    cutoff = now - settings.forgetting.min_age_days * SECONDS_PER_DAY
    tables = {}
    for kind, rows, evidence in (("memory", _eligible_memories(db, cutoff), imp.memory_evidence(db)),
                                 ("episode", _eligible_episodes(db, cutoff), imp.episode_evidence(db))):
        ids = rows[:, 0].astype(np.int64)
        since_use = (now - rows[:, 1]) / SECONDS_PER_DAY
        earned = imp.earned_importance(rows[:, 2], np.zeros(len(ids)), imp.lookup(evidence, ids), settings,
                                       since_use)
        fresh = imp.freshness((now - rows[:, 3]) / SECONDS_PER_DAY, settings)
        importance = np.minimum(1.0, np.maximum(earned, rows[:, 4]) + fresh)
        recency = recency_score(since_use, half_life(kind, settings))
        cosine, preference = _closeness(db, kind, ids, ctx, labels)
        reference = rel.reference(cosine)
        relevance = rel.relevance(cosine, reference)
        retention = retention_probability(recency, relevance, importance, settings,
                                          preference=0.0 if preference is None else preference, delta=delta)
        tables[kind] = ScoreTable(kind, ids, since_use, recency, relevance, importance, retention, reference,
                                  preference)
    return tables


def _closeness(db: Database, kind: str, ids: np.ndarray, ctx: rel.Context,
               labels: pref.Labels | None) -> tuple[np.ndarray, np.ndarray | None]:
    """In one read of the items' vectors: their cosines to the relevance reference points (grouped), and their
    preference from the labelled items (None when there is nothing to vote with)."""
    points = ctx.points()
    voting = labels is not None and labels.informative
    cosine = np.full((len(ids), 0 if points is None else len(points)), np.nan)
    preference = np.zeros(len(ids)) if voting else None
    if points is None and not voting:
        return np.empty((len(ids), 0)), None
    own = pref.own_columns(labels, kind, ids)
    for rows, unit in rel.unit_chunks(db, kind, ids):
        if points is not None:
            cosine[rows] = unit @ points.T
        if voting:
            preference[rows] = pref.vote(unit @ labels.vectors.T, labels, own[rows], kind)  # type: ignore
    return (ctx.grouped(cosine) if points is not None else np.empty((len(ids), 0))), preference


def rescored(tables: dict[str, ScoreTable], settings: Settings, delta: float) -> dict[str, ScoreTable]:
    """The same terms under other weights (the ones a pass has just learnt)."""
    return {kind: replace(t, retention=retention_probability(t.recency, t.relevance, t.importance, settings,
                                                             preference=t.preferences(), delta=delta))
            for kind, t in tables.items()}


# What forgetting may ever take (pinned, protected, permanent and critical never; nor a summary of forgotten turns)
FORGETTABLE_MEMORIES = ("FROM active_memories WHERE pinned = 0 AND protected = 0 AND permanent = 0 AND critical = 0 "
                        "AND NOT (kind = 'summary' AND id IN (SELECT summary_id FROM episodes WHERE forgotten_at IS "
                        "NOT NULL AND summary_id IS NOT NULL))")
FORGETTABLE_EPISODES = "FROM episodes WHERE deleted_at IS NULL AND forgotten_at IS NULL AND protected = 0"


@dataclass(frozen=True)
class TooYoung:
    """Items forgetting may take once they are min_age_days old: how many, and when the first one is."""
    count: int
    first_at: float | None


def too_young(db: Database, settings: Settings, *, now: float | None = None) -> TooYoung:
    now = db.now() if now is None else now
    cutoff = now - settings.forgetting.min_age_days * SECONDS_PER_DAY
    count, oldest = 0, None
    for source in (FORGETTABLE_MEMORIES, FORGETTABLE_EPISODES):
        n, first = db.execute(f"SELECT count(*), min(created_at) {source} AND created_at > ?", (cutoff,)).fetchall()[0]
        count += int(n)
        oldest = first if oldest is None or (first is not None and first < oldest) else oldest
    return TooYoung(count, None if oldest is None else oldest + settings.forgetting.min_age_days * SECONDS_PER_DAY)


def _eligible_memories(db: Database, cutoff: float) -> np.ndarray:
    rows = db.execute("SELECT id, coalesce(last_access, created_at), access_count, created_at, importance "
                      f"{FORGETTABLE_MEMORIES} AND created_at <= ? ORDER BY id", (cutoff,)).fetchall()
    return np.array(rows, dtype=np.float64).reshape(-1, 5)


def _eligible_episodes(db: Database, cutoff: float) -> np.ndarray:
    rows = db.execute("SELECT id, coalesce(last_access, created_at), access_count, created_at, 0.0 "
                      f"{FORGETTABLE_EPISODES} AND created_at <= ? ORDER BY id", (cutoff,)).fetchall()
    return np.array(rows, dtype=np.float64).reshape(-1, 5)
