"""Recall's reads from the store: vector and BM25 candidates, the rows behind them, turn neighbours, edges.

Read-only by design (recall runs on a read lane while the turn pipeline writes): nothing here binds an
embedder, records an access or creates a table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from core.errors import EmbedderMismatch
from core.memory.query import quote_fts
from core.store import sentences, vectors
from core.store.db import Database

FTS_TABLES = {"memory": "memories_fts", "episode": "episodes_fts"}
# BM25 column weights: a memory's statement and triple ends, an episode's words before its speaker's name.
BM25_WEIGHTS = {"memory": "1.0, 0.6, 0.3, 0.6", "episode": "1.0, 0.8, 0.5"}
# FTS5 scores every document a query matches before it can sort (~1 µs each here), so a query's words are
# used rarest first while their documents together stay within this budget (bench/recall.py: latency).
BM25_BUDGET = 1000


@dataclass
class Candidate:
    """One memory or episode under consideration, with what each retriever said about it."""

    kind: str
    id: int
    distance: float | None = None  # cosine distance to the query, when known
    bm25: float | None = None  # FTS5 bm25(): negative, lower is better
    row: dict = field(default_factory=dict)  # the columns rescoring needs


def check_embedder(db: Database, name: str, dimension: int) -> bool:
    """True when the store has vectors made by this embedder; EmbedderMismatch when by another one."""
    bound = vectors.bound_embedder(db)
    if bound is None:
        return False
    if bound != (name, int(dimension)):
        raise EmbedderMismatch(
            f"this store's vectors were made by {bound[0]} ({bound[1]} dimensions), not {name} ({dimension}). "
            "Switch back, or re-embed the store with `engram memory reembed`.")
    return True


def vector_candidates(db: Database, kind: str, query: np.ndarray, limit: int,
                      keep: Callable[[list[int]], set[int]] | None = None) -> dict[int, float]:
    """id → cosine distance of the `limit` nearest rows, nearest first; with `keep`, passing over those it refuses
    where the vector search can (core.store.vectors.knn). Others may come back: recall filters them.
    Turns are found by their own vectors, then each one's distance is the nearer of its own and its nearest
    sentence's (core.memory.sentences): sentences rescore, they are not searched (LoCoMo dev R@10/R@50: a search of
    the sentences as well 0.8285/0.9252, rescoring alone 0.8284/0.9261, ~1.5 ms a recall cheaper)."""
    found = dict(vectors.knn(db, kind, query, limit, keep=keep))  # type: ignore[arg-type]
    if kind != "episode":
        return found
    nearest = sentences.turn_distances(db, query, list(found))
    return dict(sorted(nearest.items(), key=lambda item: (item[1], item[0])))


def bm25_candidates(db: Database, kind: str, terms: Sequence[str], limit: int) -> dict[int, float]:
    """id → bm25 of the best `limit` full-text matches of the affordable terms (inactive rows included:
    filtered later), best first; ties by id.

    The FTS table is queried alone so SQLite keeps only the top `limit` while it ranks (a join would sort all).
    bm25() is ordered on directly: `rank MATCH 'bm25(…)'` makes FTS5 prepare a statement of its own each query
    and rank through it, the same rows at twice the cost (0.46 against 1.1 ms for a turn's search at 100k)."""
    table = FTS_TABLES[kind]
    fts_query = " OR ".join(quote_fts(t) for t in affordable_terms(db, table, terms))
    if not fts_query:
        return {}
    score = f"bm25({table}, {BM25_WEIGHTS[kind]})"
    rows = db.execute(f"SELECT rowid, {score} FROM {table} WHERE {table} MATCH ? ORDER BY {score}, rowid LIMIT ?",
                      (fts_query, int(limit))).fetchall()
    return {int(i): float(s) for i, s in rows}


def speaker_terms(db: Database, terms: Sequence[str]) -> set[str]:
    """The query terms that are (part of) the name of someone who spoke a turn: an indexed lookup each."""
    return {term for term in terms if db.scalar(
        "SELECT count(*) FROM (SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ? LIMIT 1)",
        ("speaker : " + quote_fts(term),))}


def affordable_terms(db: Database, table: str, terms: Sequence[str], budget: int | None = None) -> list[str]:
    """The terms, rarest first, while the documents they match together fit in the budget. A word in
    thousands of rows tells BM25 little (a low IDF) that the vector search does not, yet costs the most."""
    budget = BM25_BUDGET if budget is None else budget
    counted = sorted((_document_count(db, table, term, budget + 1), i) for i, term in enumerate(terms))
    chosen, total = [], 0
    for count, i in counted:
        if total + count > budget:
            break
        chosen.append(terms[i])
        total += count
    return chosen


def _document_count(db: Database, table: str, term: str, cap: int) -> int:
    """How many rows contain the term, counted no further than `cap` (reading a doclist is cheap, ranking is not)."""
    return int(db.scalar(f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)",
                         (quote_fts(term), int(cap))))


def load_rows(db: Database, kind: str, ids: Iterable[int]) -> dict[int, dict]:
    """The columns rescoring and the explanation need, keyed by id; unknown ids are left out."""
    keys = sorted({int(i) for i in ids})
    if not keys:
        return {}
    marks = ",".join("?" * len(keys))
    if kind == "memory":
        sql = ("SELECT id, statement AS text, kind AS type, confidence, importance, pinned, protected, permanent, "
               "critical, created_at, last_access, invalidated_at, forgotten_at, deleted_at, NULL AS session_id "
               f"FROM memories WHERE id IN ({marks})")
    else:
        sql = ("SELECT id, user_text, assistant_text, speaker, 'episode' AS type, 1.0 AS confidence, "
               "0.0 AS importance, 0 AS pinned, 0 AS critical, created_at, last_access, NULL AS invalidated_at, "
               f"forgotten_at, deleted_at, session_id FROM episodes WHERE id IN ({marks})")
    return {r["id"]: r for r in db.query(sql, keys)}


def is_active(row: dict) -> bool:
    return row["invalidated_at"] is None and row["forgotten_at"] is None and row["deleted_at"] is None


def activity(db: Database, kind: str, ids: Iterable[int]) -> dict[int, bool]:
    """id → whether the row is active (not invalidated, forgotten or trashed), without loading it; unknown ids are
    left out. For a retriever asked deeper than usual: hundreds of rows, most of which recall will not keep."""
    keys = sorted({int(i) for i in ids})
    if not keys:
        return {}
    table, invalidated = ("memories", "invalidated_at") if kind == "memory" else ("episodes", "NULL")
    marks = ",".join("?" * len(keys))
    return {int(i): bool(a) for i, a in db.execute(
        f"SELECT id, {invalidated} IS NULL AND forgotten_at IS NULL AND deleted_at IS NULL FROM {table} "
        f"WHERE id IN ({marks})", keys)}


def turn_neighbours(db: Database, ids: Sequence[int], include_history: bool) -> dict[int, list[int]]:
    """Each episode's previous and next turn in its own session (a question and its answer sit side by side)."""
    if not ids:
        return {}
    active = "1" if include_history else "n.deleted_at IS NULL AND n.forgotten_at IS NULL"
    found: dict[int, list[int]] = {int(i): [] for i in ids}
    marks = ",".join("?" * len(found))
    side = ("(SELECT n.id FROM episodes n WHERE n.session_id = e.session_id AND {active} AND (n.created_at, n.id) "
            "{direction} (e.created_at, e.id) ORDER BY n.created_at {order}, n.id {order} LIMIT 1)")
    before, after = (side.format(active=active, direction=d, order=o) for d, o in (("<", "DESC"), (">", "ASC")))
    rows = db.execute(f"SELECT e.id, {before}, {after} FROM episodes e "  # one statement for both sides
                      f"WHERE e.id IN ({marks}) AND e.session_id IS NOT NULL", list(found))
    for episode_id, *beside in rows:
        found[int(episode_id)] += [int(n) for n in beside if n is not None]
    return found


def in_context_turns(db: Database, session_id: int, count: int) -> set[int]:
    """The newest `count` turns of the conversation in progress: already in the prompt, so not recalled."""
    if count <= 0:
        return set()
    return {int(i) for (i,) in db.execute(
        "SELECT id FROM episodes WHERE session_id = ? ORDER BY created_at DESC, id DESC LIMIT ?",
        (int(session_id), int(count)))}


def strong_edges(db: Database, seeds: Sequence[int], min_weight: float) -> list[tuple[int, int, float, str]]:
    """(seed, neighbour, weight, kind) for every edge at least `min_weight` strong touching a seed memory."""
    if not seeds:
        return []
    marks = ",".join("?" * len(seeds))
    keys = [int(s) for s in seeds]
    rows = db.execute(
        f"SELECT a_id, b_id, weight, kind FROM edges WHERE weight >= ? AND a_id IN ({marks}) "
        f"UNION ALL SELECT b_id, a_id, weight, kind FROM edges WHERE weight >= ? AND b_id IN ({marks})",
        [float(min_weight), *keys, float(min_weight), *keys]).fetchall()
    return [(int(s), int(n), float(w), str(k)) for s, n, w, k in rows]


def distances_to(db: Database, kind: str, query: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
    """Exact cosine distance from the query to each given row that has a vector (a turn's: the nearer of its own
    and its nearest sentence's, core.store.sentences.turn_distances)."""
    if kind == "episode":
        return sentences.turn_distances(db, query, ids)
    return vectors.distances(db, kind, query, list(ids))  # type: ignore[arg-type]
