"""Relevance, forgetting's second term: how close an item is to what the user cares about lately.

Two reference points (seed 001's "recent context", widened by what the user does with forgetting):
- the conversation: the mean vector of the newest `context_episodes` episodes;
- the restores: the items the user asked back from forgetting within a half-life, the nearest of them (a
  restore says "I care about this", as talking about it does).

An item's relevance to one of them is its cosine rescaled so the median item scores 0 and an identical one 1
(turns share a template, so raw cosines are all high); with both, the larger counts. To the restores, the
nearest one counts, not their mean: what the user asks back shares a person or a place with what else they
will want, and a mean of several people is close to no one (in bench/forgetting.py the nearest restore puts
family items at cosine ~0.65 and errands at ~0.18; the mean, 0.43 and 0.14).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from core.config import Settings
from core.store import vectors
from core.store.db import Database

SECONDS_PER_DAY = 86400.0
VECTOR_CHUNK = 5000


@dataclass(frozen=True)
class Context:
    conversation: np.ndarray | None  # normalised mean of the newest episodes' vectors
    restored: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)  # (kind, id) -> vector

    def points(self, leave_out: tuple[str, int] | None = None) -> np.ndarray | None:
        """The reference vectors as rows: the conversation's centroid first, then each restored item; `leave_out`
        drops one restored item (an item is not relevant for being close to itself)."""
        rows = [] if self.conversation is None else [self.conversation]
        rows += [v / max(float(np.linalg.norm(v)), 1e-12) for key, v in self.restored.items() if key != leave_out]
        return np.stack(rows) if rows else None

    def grouped(self, cosine: np.ndarray) -> np.ndarray:
        """Cosines to `points` reduced to one column per reference: the conversation, and the closest restore
        (the nearest one, not their mean: what the user asks back shares a person or a place, not a centroid)."""
        first = 0 if self.conversation is None else 1
        columns = [cosine[:, :first]] if first else []
        if cosine.shape[1] > first:
            columns.append(cosine[:, first:].max(axis=1, keepdims=True))
        return np.concatenate(columns, axis=1) if columns else np.empty((len(cosine), 0))


def context(db: Database, settings: Settings, now: float) -> Context:
    return Context(context_centroid(db, settings), restored_vectors(db, settings, now))


def context_centroid(db: Database, settings: Settings) -> np.ndarray | None:
    """The 'recent context': the normalised mean vector of the newest episodes."""
    ids = [r[0] for r in db.execute("SELECT id FROM episodes WHERE deleted_at IS NULL ORDER BY created_at DESC, "
                                    "id DESC LIMIT ?", (int(settings.forgetting.context_episodes),))]
    return _normalised_mean(list(vectors.get_vectors(db, "episode", ids).values()))


def restored_vectors(db: Database, settings: Settings, now: float) -> dict[tuple[str, int], np.ndarray]:
    """The vectors of the newest `context_episodes` items restored within a half-life."""
    since = now - settings.forgetting.recency_half_life_days * SECONDS_PER_DAY
    rows = db.query("SELECT DISTINCT item_type, item_id FROM forgetting_events WHERE restored_at >= ? "
                    "ORDER BY restored_at DESC LIMIT ?", (since, int(settings.forgetting.context_episodes)))
    found: dict[tuple[str, int], np.ndarray] = {}
    for kind in ("memory", "episode"):
        ids = [r["item_id"] for r in rows if r["item_type"] == kind]
        found.update({(kind, int(i)): v for i, v in vectors.get_vectors(db, kind, ids).items()})
    return found


def cosines(db: Database, kind: str, ids: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Cosine of each item's vector with each centroid (rows: items); NaN for an item without a vector."""
    out = np.full((len(ids), len(centroids)), np.nan)
    for rows, unit in unit_chunks(db, kind, ids):
        out[rows] = unit @ centroids.T
    return out


def unit_chunks(db: Database, kind: str, ids: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The items' vectors, normalised, VECTOR_CHUNK at a time: (their positions in ids, the rows); an item
    without a vector is left out."""
    position = {int(i): n for n, i in enumerate(ids)}
    for start in range(0, len(ids), VECTOR_CHUNK):
        found = vectors.get_vectors(db, kind, [int(i) for i in ids[start:start + VECTOR_CHUNK]])  # type: ignore
        if found:  # one concatenation and an in-place division: the same numbers as stack-then-divide, less copying
            matrix = np.concatenate(list(found.values())).reshape(len(found), -1).astype(np.float64)
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)[:, None]
            yield np.array([position[i] for i in found]), matrix


def reference(cosine: np.ndarray) -> np.ndarray | None:
    """The sorted cosines of the items that have a vector, per centroid: what 'closer than usual' means."""
    known = cosine[~np.isnan(cosine).any(axis=1)] if cosine.size else cosine
    return np.sort(known, axis=0) if len(known) else None


def relevance(cosine: np.ndarray, ref: np.ndarray | None) -> np.ndarray:
    """How much closer than the median item each item is, rescaled so the median scores 0 and an identical item
    1; the larger over the references. An item without a vector counts as the median (0)."""
    if ref is None or cosine.size == 0:
        return np.zeros(len(cosine))
    baseline = np.median(ref, axis=0)
    filled = np.where(np.isnan(cosine), baseline, cosine)
    return np.clip((filled - baseline) / np.maximum(1.0 - baseline, 1e-6), 0.0, 1.0).max(axis=1)


def _normalised_mean(found: list[np.ndarray]) -> np.ndarray | None:
    if not found:
        return None
    mean = np.mean(np.stack(found), axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else None
