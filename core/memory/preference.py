"""Preference: forgetting's content term, what the user's own answers say about items like this one.

α, β, γ and the bias move one boundary for the whole store, but what a user asks back is usually about content
(their family, not their errands). Every item the user answered about is a labelled point: restored (y = 1), or
forgotten and left alone for learned.SILENCE_DAYS (y = 0), or a memory or turn a reply drew on (a use,
core.memory.attribution) that the user kept (y = 1: asked about and found; a memory not vetoed nor rated useless;
core.store.turns.kept_by_replies, used_turns) — each item's latest answer, the newest LABEL_LIMIT of them. Uses
count because what the user keeps asking about is kept by the forgetting it helps: with restores alone the labels
near family thinned out as forgetting got better at keeping it. An item's preference is the vote of its NEIGHBOURS
nearest labelled items by their stored vectors, each weighted by how much closer
than usual it is (the cosine rescaled so the labelled items' median pairwise cosine counts 0, an identical one 1),
shrunk towards r, the share of the labelled items of its kind that say "keep" (Labels.rate_of), by PRIOR_STRENGTH
pseudo-neighbours, as log-odds against r:

    v = (Σ wᵢ·yᵢ + s·r) / (Σ wᵢ + s),   preference = logit(v) − logit(r),  within ±learned.PREFERENCE_LIMIT

so it is 0 — forgetting as it was — for a user without both kinds of answer, for an item with no labelled item
near it, and large only with many close neighbours that agree. An item is never its own neighbour. Log-odds
because it enters a logistic model: with weight δ = 1 it adds the neighbours' evidence as it is (a naive-Bayes
update of the item's odds); δ is learnt from there (core.memory.learned). Measured in bench/forgetting.py (seed 7):
the difference v − r instead moved errands by ~0.15 logit and family by ~0.3, too little to pay for the family
items it kept (store 527 vs 522), while log-odds let errands and other content the user leaves alone go.
Why a vote and not closeness to restores alone (core.memory.relevance): silences are labels too, so content the
user lets go scores below 0 and content they ask back above it, whatever the conversation is about lately.
Used only while forgetting learns (forgetting.learn).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.memory.learned import PREFERENCE_LIMIT, SILENCE_DAYS
from core.store import turns, vectors
from core.store.db import Database

SECONDS_PER_DAY = 86400.0
LABEL_LIMIT = 500  # the newest labelled items: bounds the pass's cost (n x 500 cosines) and follows a changing user
NEIGHBOURS = 10  # labelled items that vote for one item
PRIOR_STRENGTH = 1.0  # s: pseudo-neighbours at the user's rate; one close neighbour moves v half way


@dataclass(frozen=True)
class Labels:
    keys: tuple[tuple[str, int], ...]  # (item type, id) of each labelled item
    vectors: np.ndarray  # unit rows, one per key
    kept: np.ndarray  # 1.0 restored or used, 0.0 left alone
    usual: float  # the median cosine between two labelled items: closer than this counts
    column: dict[tuple[str, int], int] = field(default_factory=dict)  # key -> row of vectors

    @property
    def rate(self) -> float:
        return float(self.kept.mean()) if len(self.kept) else 0.0

    def rate_of(self, kind: str) -> float:
        """The rate among the labelled items of one kind (memory / episode), what an item of that kind is measured
        against: turns fade three times faster than facts and replies use them differently, so the two kinds'
        labels mix differently, and an item's nearest labelled items are mostly of its own kind. The overall rate
        when that kind has no labels or only one answer."""
        mine = np.array([k[0] == kind for k in self.keys], dtype=bool)
        rate = float(self.kept[mine].mean()) if mine.any() else self.rate
        return rate if 0.0 < rate < 1.0 else self.rate

    @property
    def informative(self) -> bool:
        """Both answers present: with only restores (or only silences) every item's vote is the rate itself."""
        return 0.0 < self.rate < 1.0


def labels(db: Database, now: float) -> Labels | None:
    """The user's labels from the forgetting log and their replies: per item its latest answer (a restore, a use, or
    a silence that has lasted SILENCE_DAYS; a newer forgetting still waiting for an answer leaves the earlier one
    standing)."""
    latest: dict[tuple[str, int], float] = {}
    for _, key, answer in sorted(_answers(db, now) + _used(db), key=lambda a: a[0]):
        latest.pop(key, None)  # re-inserted: the dict's order is the order of the latest answers
        latest[key] = answer
    newest = list(latest.items())[-LABEL_LIMIT:]
    found = {kind: vectors.get_vectors(db, kind, [i for (k, i), _ in newest if k == kind])
             for kind in ("memory", "episode")}
    kept = [(key, y, found[key[0]][key[1]]) for key, y in newest if key[1] in found[key[0]]]
    if len(kept) < 2:
        return None
    keys = tuple(k for k, _, _ in kept)
    matrix = np.stack([v / max(float(np.linalg.norm(v)), 1e-12) for _, _, v in kept]).astype(np.float64)
    pairwise = matrix @ matrix.T
    usual = float(np.median(pairwise[~np.eye(len(keys), dtype=bool)]))
    return Labels(keys, matrix, np.array([y for _, y, _ in kept]), min(usual, 0.99),
                  {key: n for n, key in enumerate(keys)})


def _answers(db: Database, now: float) -> list[tuple[float, tuple[str, int], float]]:
    """(when, item, label) of each answer to the forgetting log: a restore when it was made, a silence when it had
    lasted SILENCE_DAYS."""
    rows = db.query("SELECT item_type, item_id, restored_at, at FROM forgetting_events "
                    "WHERE restored_at IS NOT NULL OR at <= ?", (now - SILENCE_DAYS * SECONDS_PER_DAY,))
    return [(float(r["restored_at"]) if r["restored_at"] is not None else float(r["at"]) + SILENCE_DAYS
             * SECONDS_PER_DAY, (r["item_type"], int(r["item_id"])), float(r["restored_at"] is not None))
            for r in rows]


def _used(db: Database) -> list[tuple[float, tuple[str, int], float]]:
    """(when, item, 1) of each memory and turn the user's replies used and the user kept, at its last use
    (core.store.turns.kept_by_replies, used_turns): asked about and found."""
    memories = [(at, ("memory", int(i)), 1.0) for i, at in turns.kept_by_replies(db, LABEL_LIMIT)]
    return memories + [(at, ("episode", int(i)), 1.0) for i, at in turns.used_turns(db, LABEL_LIMIT)]


def vote(cosine: np.ndarray, labelled: Labels, own: np.ndarray | None = None, kind: str | None = None) -> np.ndarray:
    """Each row's preference (log-odds, within ±PREFERENCE_LIMIT) from its cosines to the labelled items
    (columns); own[i] is row i's own column among them (−1: not labelled), left out of its vote. A row of NaN (no
    vector) scores 0. `kind`: the rows' kind, whose labels' rate they are measured against (None: all labels')."""
    if not labelled.informative or cosine.size == 0:
        return np.zeros(len(cosine))
    close = np.clip((np.nan_to_num(cosine, nan=-1.0) - labelled.usual) / (1.0 - labelled.usual), 0.0, 1.0)
    if own is not None and (own >= 0).any():
        rows = np.flatnonzero(own >= 0)
        close[rows, own[rows]] = 0.0
    if close.shape[1] > NEIGHBOURS:  # only the nearest vote: a topic is a neighbourhood, not the whole log
        far = np.argpartition(-close, NEIGHBOURS, axis=1)[:, NEIGHBOURS:]
        np.put_along_axis(close, far, 0.0, axis=1)
    rate = labelled.rate if kind is None else labelled.rate_of(kind)
    v = (close @ labelled.kept + PRIOR_STRENGTH * rate) / (close.sum(axis=1) + PRIOR_STRENGTH)
    return np.clip(_logit(v) - _logit(np.asarray(rate)), -PREFERENCE_LIMIT, PREFERENCE_LIMIT)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1.0 - 1e-6)
    return np.log(p / (1.0 - p))


def own_columns(labelled: Labels | None, kind: str, ids: np.ndarray) -> np.ndarray:
    """Each item's column among the labelled items, −1 for an item the user never answered about."""
    if labelled is None:
        return np.full(len(ids), -1)
    return np.array([labelled.column.get((kind, int(i)), -1) for i in ids], dtype=np.int64)


def of_items(db: Database, labelled: Labels | None, kind: str, ids: np.ndarray) -> np.ndarray:
    """The preference of a few items read by id (the ones a pass learns from), each left out of its own vote."""
    if labelled is None or not labelled.informative or len(ids) == 0:
        return np.zeros(len(ids))
    found = vectors.get_vectors(db, kind, [int(i) for i in ids])  # type: ignore[arg-type]
    cosine = np.full((len(ids), len(labelled.keys)), np.nan)
    for n, i in enumerate(ids):
        if int(i) in found:
            v = found[int(i)].astype(np.float64)
            cosine[n] = labelled.vectors @ (v / max(float(np.linalg.norm(v)), 1e-12))
    return vote(cosine, labelled, own_columns(labelled, kind, ids), kind)
