"""Importance of memories and episodes, and the importance pass the consolidation job runs.

Seeds: KenLM (002) gives the base score, 001 adds PageRank over the memory graph, MAGS the permanence
threshold and the decay of edges and importance with time:

    earned     = w_access·log(1 + access)·(1 − d)^(days since last use) + w_protected·protected
                 + w_evidence·is_evidence
                 + pagerank_weight · PageRank / max PageRank              (stored in memories.importance)
    importance = min(1, earned + w_fresh·exp(−age/τ))                    (what forgetting uses)

`is_evidence` is 1 when the item (an episode, or a memory through its source episodes) supports a hypothesis
that was not rejected. PageRank runs over the Hebbian and similarity edges (summary and supersedes links are
bookkeeping, not evidence that a memory matters). The stored (earned) importance never drops faster than
importance_decay_per_day allows, so a memory that mattered fades slowly instead of falling off a cliff; once
it reaches permanence_threshold the memory becomes permanent (never forgotten) and a 'permanent' history row
says why. Freshness is added when retention is scored, so it fades with the memory's real age.

One pass over the whole store is `update_importance(db, settings)`: Hebbian edge decay (core.memory.hebbian),
PageRank (numpy power iteration over a networkx graph, without scipy: see pagerank), and a batch UPDATE of the rows
whose importance changed. It runs in a few seconds at 100k memories.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from core.config import Settings
from core.memory import hebbian
from core.store import edges, history
from core.store.db import Database

if TYPE_CHECKING:
    import networkx as nx

SECONDS_PER_DAY = 86400.0
PASS_META_KEY = "importance_pass_at"
CHANGE_EPSILON = 1e-4  # smaller changes are not written back
RANKED_EDGES = ("hebbian", "similarity")


@dataclass(frozen=True)
class ImportanceReport:
    memories: int
    updated: int
    edges_dropped: int
    made_permanent: tuple[int, ...]


def earned_importance(access: np.ndarray, protected: np.ndarray, evidence: np.ndarray, settings: Settings,
                      days_since_use: np.ndarray | float = 0.0) -> np.ndarray:
    """The part of KenLM's importance a memory earns: use, the user's protection, evidence for a hypothesis.
    What use earned fades at importance_decay_per_day since the last use, so a burst of early use wears off."""
    w = settings.importance
    use = np.log1p(np.maximum(access, 0)) * decayed(1.0, days_since_use, settings)
    return w.access * use + w.protected * (protected > 0) + w.evidence * (evidence > 0)


def freshness(age_days: np.ndarray, settings: Settings) -> np.ndarray:
    """The part that fades with age alone: w_fresh·exp(−age/τ)."""
    w = settings.importance
    return w.freshness * np.exp(-np.maximum(age_days, 0.0) / max(w.freshness_tau_days, 1e-9))


def base_importance(access: np.ndarray, protected: np.ndarray, evidence: np.ndarray, age_days: np.ndarray,
                    settings: Settings) -> np.ndarray:
    """KenLM's importance: use, the user's protection, evidence for a hypothesis, and freshness."""
    return earned_importance(access, protected, evidence, settings) + freshness(age_days, settings)


def pagerank_share(db: Database, ids: np.ndarray) -> np.ndarray:
    """Each memory's PageRank over the weighted edge graph, divided by the largest (0 off the graph)."""
    import networkx as nx  # here, not at the top: ~0.3 s that `forget --preview`, `jobs list` and others never use
    graph = nx.Graph()
    for a, b, weight in edges.all_edges(db, RANKED_EDGES):
        if weight > 0:
            graph.add_edge(a, b, weight=weight + graph.get_edge_data(a, b, {}).get("weight", 0.0))
    share = np.zeros(len(ids))
    if graph.number_of_edges() == 0:
        return share
    ranks = pagerank(graph)
    top = max(ranks.values())
    position = {int(i): n for n, i in enumerate(ids)}
    for node, rank in ranks.items():
        if node in position:
            share[position[node]] = rank / top
    return share


def pagerank(graph: nx.Graph, *, alpha: float = 0.85, tol: float = 1e-6, max_iter: int = 100) -> dict[int, float]:
    """Weighted PageRank by power iteration in numpy, as networkx defines it (uniform teleport and dangling mass,
    stop when the L1 change is below N·tol). networkx's own pagerank needs scipy, which Engram does not install:
    scipy came only with sentence-transformers, so a torch-free install failed here."""
    nodes = list(graph.nodes)
    index = {node: n for n, node in enumerate(nodes)}
    count = len(nodes)
    pairs = [(index[a], index[b], float(data.get("weight", 1.0))) for a, b, data in graph.edges(data=True)]
    source = np.array([p[0] for p in pairs] + [p[1] for p in pairs if p[0] != p[1]], dtype=np.int64)
    target = np.array([p[1] for p in pairs] + [p[0] for p in pairs if p[0] != p[1]], dtype=np.int64)
    weight = np.array([p[2] for p in pairs] + [p[2] for p in pairs if p[0] != p[1]], dtype=np.float64)
    out = np.bincount(source, weight, count)
    dangling = out == 0
    share = weight / np.where(out[source] > 0, out[source], 1.0)
    ranks = np.full(count, 1.0 / count)
    for _ in range(max_iter):
        previous = ranks
        ranks = (alpha * np.bincount(target, previous[source] * share, count)
                 + (alpha * previous[dangling].sum() + 1.0 - alpha) / count)
        if np.abs(ranks - previous).sum() < count * tol:
            break
    return {node: float(rank) for node, rank in zip(nodes, ranks)}


def memory_evidence(db: Database) -> dict[int, int]:
    """How many live hypotheses each memory's source episodes support."""
    return {int(m): int(n) for m, n in db.execute(
        "SELECT s.memory_id, count(DISTINCT e.hypothesis_id) FROM memory_sources s "
        "JOIN hypothesis_evidence e ON e.episode_id = s.episode_id "
        "JOIN hypotheses h ON h.id = e.hypothesis_id AND h.status != 'rejected' GROUP BY s.memory_id")}


def episode_evidence(db: Database) -> dict[int, int]:
    """How many live hypotheses each episode supports."""
    return {int(e): int(n) for e, n in db.execute(
        "SELECT e.episode_id, count(*) FROM hypothesis_evidence e "
        "JOIN hypotheses h ON h.id = e.hypothesis_id AND h.status != 'rejected' GROUP BY e.episode_id")}


def lookup(counts: dict[int, int], ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """counts[id] for each id (0 when absent), found by a sorted search rather than one dict lookup per id (100k
    ids: 0.05 s of `forget --preview` a table)."""
    found = np.zeros(len(ids))
    if not counts or not len(ids):
        return found
    keys = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    values = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    wanted = np.asarray(ids, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    hit = keys[at] == wanted
    found[hit] = values[at[hit]]
    return found


def decayed(old: np.ndarray | float, days: np.ndarray | float, settings: Settings) -> np.ndarray:
    """Importance after `days`: exponential fade at importance_decay_per_day."""
    return old * (1.0 - settings.hebbian.importance_decay_per_day) ** np.maximum(days, 0.0)


def update_importance(db: Database, settings: Settings, *, now: float | None = None) -> ImportanceReport:
    """One pass: decay Hebbian edges, recompute every active memory's importance, promote to permanent."""
    now = db.now() if now is None else now
    dropped = hebbian.decay_edges(db, settings.hebbian, now=now)
    rows = db.execute("SELECT id, access_count, protected, coalesce(last_access, created_at), importance, permanent "
                      "FROM active_memories ORDER BY id").fetchall()
    if not rows:
        _mark_pass(db, now)
        return ImportanceReport(0, 0, dropped, ())
    table = np.array(rows, dtype=np.float64)
    ids = table[:, 0].astype(np.int64)
    since_use = (now - table[:, 3]) / SECONDS_PER_DAY
    computed = earned_importance(table[:, 1], table[:, 2], lookup(memory_evidence(db), ids), settings, since_use)
    computed = np.minimum(1.0, computed + settings.hebbian.pagerank_weight * pagerank_share(db, ids))
    new = np.maximum(computed, decayed(table[:, 4], _days_since_pass(db, now), settings))
    changed = np.abs(new - table[:, 4]) > CHANGE_EPSILON
    promote = (new >= settings.hebbian.permanence_threshold) & (table[:, 5] == 0)
    with db.transaction():
        db.conn.executemany("UPDATE memories SET importance = ? WHERE id = ?",
                            [(float(v), int(i)) for v, i in zip(new[changed], ids[changed])])
        for memory_id, value in zip(ids[promote], new[promote]):
            db.execute("UPDATE memories SET permanent = 1 WHERE id = ?", (int(memory_id),))
            history.record(db, int(memory_id), "permanent", {"permanent": False}, {"permanent": True},
                           f"importance {value:.2f} reached the permanence threshold "
                           f"{settings.hebbian.permanence_threshold:.2f}", at=now)
        _mark_pass(db, now)
    return ImportanceReport(len(ids), int(changed.sum()), dropped, tuple(int(i) for i in ids[promote]))


def _days_since_pass(db: Database, now: float) -> float:
    last = db.scalar("SELECT value FROM meta WHERE key = ?", (PASS_META_KEY,))
    return 0.0 if last is None else max(0.0, (now - float(last)) / SECONDS_PER_DAY)


def _mark_pass(db: Database, now: float) -> None:
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
               (PASS_META_KEY, repr(float(now))))
