"""A read-only view of the memory graph for display: memories and entities as nodes, weighted edges.

Layout runs here too (core.memory.spring), so the GUI only draws: positions are computed off the GUI thread and
seeded with the previous positions, so a live update moves the picture a little, not all of it. Which nodes carry
a label is decided here as well (choose_labels): in screen pixels, so 2,000 nodes never become a wall of words.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from core.memory.spring import spring_positions
from core.store.db import Database

MAX_NODES = 2000
LABEL_CHARS = 24  # a label is a statement's first words, at most this long with its ellipsis
LABEL_BUDGET = (24, 80)  # labels on screen: this many in the whole-graph view, growing with zoom to at most that
LABEL_GAP = 4.0  # pixels between a node and its label; two labels keep half of it between them
CANDIDATES_PER_LABEL = 4  # nodes tried per label the budget allows: enough to fill it in a crowded picture


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
    start = None
    if previous:
        rng = np.random.default_rng(seed)
        start = np.array([previous.get(n.key, rng.uniform(-1, 1, 2)) for n in view.nodes], dtype=float)
    edges = np.array([(e.a, e.b) for e in view.edges], dtype=np.int64).reshape(-1, 2)
    weights = np.array([max(e.weight, 0.05) for e in view.edges], dtype=float)
    array = spring_positions(len(view.nodes), edges, weights, start, seed=seed,
                             iterations=iterations if start is None else 15)
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


@dataclass(frozen=True)
class PlacedLabel:
    index: int  # into GraphView.nodes
    box: tuple[float, float, float, float]  # x, y, width, height in screen pixels (y grows downwards)


def elide(text: str, limit: int = LABEL_CHARS) -> str:
    """A statement's first words on one line, ending in "…" when cut (at a word when one ends late enough)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if text[limit - 1] != " " and space >= 0.6 * limit:
        cut = cut[:space]
    return cut.rstrip(" ,.;:-") + "…"


def node_weights(view: GraphView) -> np.ndarray:
    """How much each node matters, in [0, 1]: a memory's importance (PageRank among it), an entity's number of
    links (ten or more count fully)."""
    degree = np.zeros(len(view.nodes))
    for edge in view.edges:
        degree[edge.a] += 1
        degree[edge.b] += 1
    weights = [min(degree[i] / 10.0, 1.0) if n.kind == "entity" else n.importance for i, n in enumerate(view.nodes)]
    return np.clip(np.array(weights, dtype=float), 0.0, 1.0)


def label_budget(zoom: float) -> int:
    """How many labels the picture may carry at this magnification of the whole-graph view (1.0): more as the user
    zooms in, since each visible node then has more room around it."""
    low, high = LABEL_BUDGET
    return int(min(high, max(low, round(low * np.sqrt(max(zoom, 0.0))))))


def choose_labels(screen: np.ndarray, priority: np.ndarray, sizes: np.ndarray, *, viewport: tuple[float, float],
                  pinned: Sequence[int] = (), limit: int = LABEL_BUDGET[0],
                  radius: np.ndarray | float = 6.0) -> list[PlacedLabel]:
    """The nodes to label and where, in screen pixels: the pinned ones first (the first always: the selection),
    then by priority; each label right of its node, else left, below or above, never over another label or
    past the viewport's edge, and off the other nodes (discs of `radius`) where one of those spots allows;
    nodes off screen get none."""
    width, height = viewport
    inside = np.all((screen >= 0) & (screen <= (width, height)), axis=1)
    radii = np.broadcast_to(np.asarray(radius, dtype=float), (len(screen),))
    first = [int(i) for i in dict.fromkeys(pinned) if 0 <= i < len(screen) and inside[i]]
    order = first + [int(i) for i in _crowd_winners(screen, priority, sizes, inside, limit) if i not in set(first)]
    taken = np.zeros((0, 4))
    placed: list[PlacedLabel] = []
    for i in order:
        if len(placed) >= limit:
            break
        box = _free_spot(screen[i], sizes[i], radii[i], taken, viewport, _others(screen, radii, i))
        if box is None and not placed and first and i == first[0]:
            box = _spots(screen[i], sizes[i], radii[i])[0]  # the selection is named even where it hardly fits
        if box is not None:
            x, y, width, height = (float(v) for v in box)
            placed.append(PlacedLabel(i, (x, y, width, height)))
            taken = np.vstack([taken, box])
    return placed


def _crowd_winners(screen: np.ndarray, priority: np.ndarray, sizes: np.ndarray, inside: np.ndarray,
                   limit: int) -> np.ndarray:
    """The most important on-screen node of each label-sized cell, most important first: a dense cluster offers
    one candidate, not hundreds that would all collide (keeps the placement at a few ms for 2,000 nodes)."""
    index = np.flatnonzero(inside)
    if not len(index):
        return index
    index = index[np.argsort(-priority[index], kind="stable")]
    cell = np.maximum(np.median(sizes[index], axis=0), 1.0)
    cells = np.floor(screen[index] / cell).astype(np.int64)
    keys = cells[:, 0] * 1_000_003 + cells[:, 1]
    _, first = np.unique(keys, return_index=True)
    return index[np.sort(first)][:limit * CANDIDATES_PER_LABEL]


def _spots(point: np.ndarray, size: np.ndarray, radius: float) -> np.ndarray:
    """Where a label may go around its node, in order of preference: right, left, below, above."""
    x, y = point
    w, h = size
    reach = radius + LABEL_GAP
    return np.array([(x + reach, y - h / 2, w, h), (x - reach - w, y - h / 2, w, h),
                     (x - w / 2, y + reach, w, h), (x - w / 2, y - reach - h, w, h)])


def _free_spot(point: np.ndarray, size: np.ndarray, radius: float, taken: np.ndarray,
               viewport: tuple[float, float], nodes: np.ndarray) -> np.ndarray | None:
    """The first spot clear of other labels and of other nodes; else the first clear of labels only (a label
    over a node beats no label: in a dense cluster every spot covers one)."""
    fallback = None
    for box in _spots(point, size, radius):
        x, y, w, h = box
        if x < 0 or y < 0 or x + w > viewport[0] or y + h > viewport[1]:
            continue
        g = LABEL_GAP / 2
        clash = ((x - g < taken[:, 0] + taken[:, 2]) & (taken[:, 0] - g < x + w)
                 & (y - g < taken[:, 1] + taken[:, 3]) & (taken[:, 1] - g < y + h))
        if clash.any():
            continue
        if not _covers_a_node(box, nodes):
            return box
        fallback = box if fallback is None else fallback
    return fallback


def _others(screen: np.ndarray, radii: np.ndarray, index: int) -> np.ndarray:
    """Every node but `index` as (x, y, radius) rows; hidden ones (NaN) never count as covered."""
    discs = np.column_stack([screen, radii])
    return np.delete(discs, index, axis=0)


def _covers_a_node(box: np.ndarray, nodes: np.ndarray) -> bool:
    x, y, w, h = box
    cx, cy, r = nodes[:, 0], nodes[:, 1], nodes[:, 2]
    dx = np.maximum(np.maximum(x - cx, cx - (x + w)), 0.0)  # from the disc's centre to the nearest point of the box
    dy = np.maximum(np.maximum(y - cy, cy - (y + h)), 0.0)
    with np.errstate(invalid="ignore"):
        return bool(np.any(dx * dx + dy * dy < r * r))
