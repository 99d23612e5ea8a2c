"""A force-directed layout for the memory graph (Fruchterman–Reingold), in numpy alone.

Why not networkx's spring_layout: from 500 nodes on it needs scipy, which the app bundle leaves out (the graph panel
of a large store failed there; a source install has scipy through sentence-transformers), and there it took 7.6 s
for 2,000 nodes here. This is the same model and cooling as its small-graph path: every pair repels by k²/d, each
edge attracts by weight × d²/k, and each step moves a node by at most the temperature, which falls linearly to zero.
Repulsion is dense (float32, no square root needed); attraction is summed over the edges only, not through a dense
adjacency matrix. 2,000 nodes: 0.85 s.
"""
from __future__ import annotations

import numpy as np

MIN_DISTANCE = 0.01  # as networkx: two nodes on the same spot still push each other apart


def spring_positions(count: int, edges: np.ndarray, weights: np.ndarray, start: np.ndarray | None = None, *,
                     iterations: int = 40, seed: int = 7) -> np.ndarray:
    """(count, 2) positions scaled so the farthest coordinate is 1, centred on 0. `edges`: (m, 2) node indices;
    `start`: earlier positions to begin from (a layout that only moves a little), else random ones."""
    if count <= 1:
        return np.zeros((count, 2))  # one node sits at the centre
    start = np.random.default_rng(seed).random((count, 2)) if start is None else start
    pos = np.asarray(start, dtype=np.float32).copy()  # moved in place; the caller's array is left alone
    k = np.float32(np.sqrt(1.0 / count))
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    weights = np.asarray(weights, dtype=np.float32)
    temperature = 0.1 * float(max(np.ptp(pos[:, 0]), np.ptp(pos[:, 1])))
    cooling = temperature / (iterations + 1)
    for _ in range(iterations):
        step = _repulsion(pos, k) + _attraction(pos, edges, weights, k)
        length = np.maximum(np.linalg.norm(step, axis=1), MIN_DISTANCE)
        pos += step * (temperature / length)[:, None]
        temperature -= cooling
    return _rescaled(pos.astype(float))


def _repulsion(pos: np.ndarray, k: np.float32) -> np.ndarray:
    """Σ_j (p_i − p_j) · k² / d_ij²: the k²/d push along the unit vector."""
    dx = pos[:, 0, None] - pos[None, :, 0]
    dy = pos[:, 1, None] - pos[None, :, 1]
    push = dx * dx
    push += dy * dy
    np.maximum(push, MIN_DISTANCE ** 2, out=push)
    np.divide(k * k, push, out=push)
    return np.stack([np.einsum("ij,ij->i", dx, push), np.einsum("ij,ij->i", dy, push)], axis=1)


def _attraction(pos: np.ndarray, edges: np.ndarray, weights: np.ndarray, k: np.float32) -> np.ndarray:
    """For each edge, −(p_i − p_j) · w · d / k on i and the opposite on j: the w·d²/k pull along the unit vector."""
    pull = np.zeros_like(pos)
    if not len(edges):
        return pull
    a, b = edges[:, 0], edges[:, 1]
    delta = pos[a] - pos[b]
    distance = np.maximum(np.linalg.norm(delta, axis=1), MIN_DISTANCE)
    force = delta * (weights * distance / k)[:, None]
    np.add.at(pull, a, -force)
    np.add.at(pull, b, force)
    return pull


def _rescaled(pos: np.ndarray) -> np.ndarray:
    pos = pos - pos.mean(axis=0)
    largest = np.abs(pos).max()
    return pos / largest if largest > 0 else pos
