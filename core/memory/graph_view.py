"""A read-only view of the memory graph for display: memories and entities as nodes, weighted edges.

Layout runs here too (networkx), so the GUI only draws: positions are computed off the GUI thread and
seeded with the previous positions, so a live update moves the picture a little, not all of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import networkx as nx
import numpy as np

from core.store.db import Database

MAX_NODES = 2000


@dataclass(frozen=True)
class GraphNode:
    key: str  # "m12" for memory 12, "e3" for entity 3
    label: str
    kind: str  # semantic / episodic / summary / entity
    importance: float
    memory_id: int | None = None


@dataclass(frozen=True)
class GraphEdge:
    a: int  # index into GraphView.nodes
    b: int
    weight: float
    kind: str  # hebbian / similarity / supersedes / summary / entity


@dataclass(frozen=True)
class GraphView:
    nodes: tuple[GraphNode, ...] = ()
    edges: tuple[GraphEdge, ...] = ()
    positions: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))

    def index_of(self, key: str) -> int | None:
        return next((i for i, node in enumerate(self.nodes) if node.key == key), None)


def load_graph(db: Database, *, limit: int = MAX_NODES, search: str = "", around: int | None = None,
               hops: int = 1) -> GraphView:
    """The most important active memories (or the neighbourhood of one, or of a search) with their entities."""
    memories = _memories(db, limit, search)
    if around is not None:
        keep = _neighbourhood(db, around, hops)
        memories = [m for m in _memories_by_id(db, keep)]
    nodes = [GraphNode(f"m{m['id']}", m["statement"], m["kind"], m["importance"], m["id"]) for m in memories]
    index = {node.key: i for i, node in enumerate(nodes)}
    edges = _memory_edges(db, index)
    _add_entities(db, nodes, edges, index)
    return GraphView(tuple(nodes), tuple(edges))


def layout(view: GraphView, previous: Mapping[str, tuple[float, float]] | None = None, *,
           seed: int = 7, iterations: int = 40) -> GraphView:
    """Spring layout weighted by edge strength, starting from earlier positions where there are some."""
    if not view.nodes:
        return view
    graph = nx.Graph()
    graph.add_nodes_from(range(len(view.nodes)))
    graph.add_weighted_edges_from((e.a, e.b, max(e.weight, 0.05)) for e in view.edges)
    start = None
    if previous:
        rng = np.random.default_rng(seed)
        start = {i: np.asarray(previous.get(n.key, rng.uniform(-1, 1, 2))) for i, n in enumerate(view.nodes)}
    positions = nx.spring_layout(graph, pos=start, iterations=iterations if start is None else 15, seed=seed,
                                 weight="weight")
    array = np.array([positions[i] for i in range(len(view.nodes))], dtype=float)
    return GraphView(view.nodes, view.edges, array)


def _memories(db: Database, limit: int, search: str) -> list[dict]:
    if search.strip():
        like = f"%{search.strip().lower()}%"
        return db.query("SELECT id, statement, kind, importance FROM active_memories WHERE lower(statement) LIKE ? "
                        "OR lower(subject) LIKE ? OR lower(object) LIKE ? ORDER BY importance DESC LIMIT ?",
                        (like, like, like, int(limit)))
    return db.query("SELECT id, statement, kind, importance FROM active_memories "
                    "ORDER BY importance DESC, id DESC LIMIT ?", (int(limit),))


def _memories_by_id(db: Database, ids: set[int]) -> list[dict]:
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return db.query(f"SELECT id, statement, kind, importance FROM active_memories WHERE id IN ({marks})",
                    sorted(ids))


def _neighbourhood(db: Database, center: int, hops: int) -> set[int]:
    found, frontier = {int(center)}, {int(center)}
    for _ in range(max(hops, 0)):
        if not frontier:
            break
        marks = ",".join("?" * len(frontier))
        rows = db.execute(f"SELECT a_id, b_id FROM edges WHERE a_id IN ({marks}) OR b_id IN ({marks})",
                          [*frontier, *frontier]).fetchall()
        nxt = {x for row in rows for x in row} - found
        found |= nxt
        frontier = nxt
    return found


def _memory_edges(db: Database, index: dict[str, int]) -> list[GraphEdge]:
    edges = []
    for a, b, weight, kind in db.execute("SELECT a_id, b_id, weight, kind FROM edges"):
        ia, ib = index.get(f"m{a}"), index.get(f"m{b}")
        if ia is not None and ib is not None:
            edges.append(GraphEdge(ia, ib, float(weight), kind))
    return edges


def _add_entities(db: Database, nodes: list[GraphNode], edges: list[GraphEdge], index: dict[str, int]) -> None:
    rows = db.execute("SELECT me.memory_id, e.id, e.name FROM memory_entities me JOIN entities e "
                      "ON e.id = me.entity_id").fetchall()
    for memory_id, entity_id, name in rows:
        memory_index = index.get(f"m{memory_id}")
        if memory_index is None:
            continue
        key = f"e{entity_id}"
        if key not in index:
            index[key] = len(nodes)
            nodes.append(GraphNode(key, name, "entity", 0.0))
        edges.append(GraphEdge(memory_index, index[key], 0.3, "entity"))
