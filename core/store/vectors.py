"""Vectors in sqlite-vec (vec0) tables, keyed to memory and episode rows.

The store records which embedding model and dimension made its vectors; opening it with another
embedder raises EmbedderMismatch and offers a re-embed, so vectors of two models never mix.
"""
from __future__ import annotations

from typing import Callable, Iterable, Literal, Sequence

import numpy as np

from core.errors import EmbedderMismatch, InvalidInput
from core.store.db import Database

Table = Literal["memory", "episode"]
VEC_TABLES: dict[str, str] = {"memory": "memory_vec", "episode": "episode_vec"}


def bound_embedder(db: Database) -> tuple[str, int] | None:
    rows = {r["key"]: r["value"] for r in db.query(
        "SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dimension')")}
    if "embedder_name" not in rows:
        return None
    return rows["embedder_name"], int(rows["embedder_dimension"])


def bind_embedder(db: Database, name: str, dimension: int) -> None:
    """Record the embedder on first use and create the vector tables; refuse a different one."""
    current = bound_embedder(db)
    if current is not None and current != (name, dimension):
        raise EmbedderMismatch(
            f"this store's vectors were made by {current[0]} ({current[1]} dimensions), not {name} "
            f"({dimension}). Switch back, or re-embed the store with `engram memory reembed`.")
    if current is None:
        with db.transaction():
            db.execute("INSERT INTO meta(key, value) VALUES ('embedder_name', ?), ('embedder_dimension', ?)",
                       (name, str(dimension)))
            _create_tables(db, dimension)


def _create_tables(db: Database, dimension: int) -> None:
    for table in VEC_TABLES.values():
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                   f"id INTEGER PRIMARY KEY, embedding float[{int(dimension)}] distance_metric=cosine)")


def upsert_vectors(db: Database, table: Table, ids: Sequence[int], vectors: np.ndarray) -> None:
    name = _table(table)
    vectors = _as_matrix(db, vectors, len(ids))
    with db.transaction():
        for row_id, vector in zip(ids, vectors):
            db.execute(f"DELETE FROM {name} WHERE id = ?", (int(row_id),))
            db.execute(f"INSERT INTO {name}(id, embedding) VALUES (?, ?)", (int(row_id), vector.tobytes()))


def delete_vectors(db: Database, table: Table, ids: Iterable[int]) -> None:
    if bound_embedder(db) is None:
        return
    name = _table(table)
    with db.transaction():
        for row_id in ids:
            db.execute(f"DELETE FROM {name} WHERE id = ?", (int(row_id),))


def knn(db: Database, table: Table, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k nearest rows as (id, cosine distance), nearest first."""
    if bound_embedder(db) is None or k <= 0:
        return []
    vector = _as_matrix(db, query, 1)[0]
    rows = db.execute(f"SELECT id, distance FROM {_table(table)} WHERE embedding MATCH ? AND k = ? "
                      "ORDER BY distance", (vector.tobytes(), int(k))).fetchall()
    return [(int(i), float(d)) for i, d in rows]


def get_vectors(db: Database, table: Table, ids: Sequence[int]) -> dict[int, np.ndarray]:
    if bound_embedder(db) is None or not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"SELECT id, embedding FROM {_table(table)} WHERE id IN ({marks})",
                      [int(i) for i in ids]).fetchall()
    return {int(i): np.frombuffer(blob, dtype=np.float32) for i, blob in rows}


def reembed(db: Database, name: str, dimension: int, texts_for: Callable[[Table], Iterable[tuple[int, str]]],
            embed: Callable[[list[str]], np.ndarray], batch: int = 256) -> int:
    """Drop every vector and embed all rows again with a new model; returns the rows embedded."""
    with db.transaction():
        for table in VEC_TABLES.values():
            db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute("DELETE FROM meta WHERE key IN ('embedder_name', 'embedder_dimension')")
    bind_embedder(db, name, dimension)
    done = 0
    for table in VEC_TABLES:
        chunk: list[tuple[int, str]] = []
        for item in texts_for(table):  # type: ignore[arg-type]
            chunk.append(item)
            if len(chunk) >= batch:
                done += _embed_chunk(db, table, chunk, embed)
                chunk = []
        if chunk:
            done += _embed_chunk(db, table, chunk, embed)
    return done


def _embed_chunk(db: Database, table: str, chunk: list[tuple[int, str]], embed) -> int:
    upsert_vectors(db, table, [i for i, _ in chunk], embed([t for _, t in chunk]))  # type: ignore[arg-type]
    return len(chunk)


def _table(table: str) -> str:
    try:
        return VEC_TABLES[table]
    except KeyError:
        raise InvalidInput(f"unknown vector table {table!r}") from None


def _as_matrix(db: Database, vectors: np.ndarray, rows: int) -> np.ndarray:
    bound = bound_embedder(db)
    matrix = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).reshape(rows, -1))
    if bound is not None and matrix.shape[1] != bound[1]:
        raise EmbedderMismatch(f"vector of dimension {matrix.shape[1]} for a store of dimension {bound[1]}")
    if not np.all(np.isfinite(matrix)):
        raise InvalidInput("vector contains NaN or infinity")
    return matrix
