"""Which embedder made a store's vectors and in which layout, and the check every vector passes before it is
stored or compared: read once for a whole query (core.store.vectors re-exports these)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from core.errors import EmbedderMismatch, InvalidInput
from core.store.vector_schema import VEC_TABLES, Table

if TYPE_CHECKING:  # annotations only: nothing db imports needs this module
    from core.store.db import Database

LAYOUT_KEY = "vector_layout"
BINARY_LAYOUT = "sharded-bits+float"


@dataclass(frozen=True)
class Binding:
    """The embedder a store's vectors were made by and their layout, read once for a whole query (recall read the
    meta table 20 times a query, ~0.3 ms at 100k)."""
    name: str
    dimension: int
    sharded: bool  # the sharded-bits layout; False for an older store's float vec0 tables

    def floats(self, table: Table) -> str:
        """The table holding `table`'s float vectors as (id, embedding)."""
        return f"{table_name(table)}_float" if self.sharded else table_name(table)

    def checked(self, vectors: np.ndarray, rows: int) -> np.ndarray:
        return _checked(vectors, rows, self.dimension)


def binding(db: Database) -> Binding | None:
    meta = read_meta(db)
    if "embedder_name" not in meta:
        return None
    return Binding(meta["embedder_name"], int(meta["embedder_dimension"]), meta.get(LAYOUT_KEY) == BINARY_LAYOUT)


def bound_embedder(db: Database) -> tuple[str, int] | None:
    bound = binding(db)
    return None if bound is None else (bound.name, bound.dimension)


def read_meta(db: Database) -> dict[str, str]:
    return {r[0]: r[1] for r in db.execute(
        "SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dimension', ?)", (LAYOUT_KEY,))}


def table_name(table: str) -> str:
    for kind, name in VEC_TABLES.items():
        if kind == table:
            return name
    raise InvalidInput(f"unknown vector table {table!r}")


def checked_matrix(db: Database, vectors: np.ndarray, rows: int) -> np.ndarray:
    """`rows` vectors as contiguous float32 rows of the bound embedder's dimension, all finite (also what a turn's
    sentences store beside the vector tables); InvalidInput or EmbedderMismatch otherwise."""
    bound = bound_embedder(db)
    return _checked(vectors, rows, None if bound is None else bound[1])


def _checked(vectors: np.ndarray, rows: int, dimension: int | None) -> np.ndarray:
    try:
        matrix = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).reshape(rows, -1))
    except ValueError:
        raise InvalidInput(f"expected {rows} vector(s), got an array of shape {np.shape(vectors)}") from None
    if dimension is not None and matrix.shape[1] != dimension:
        raise EmbedderMismatch(f"vector of dimension {matrix.shape[1]} for a store of dimension {dimension}")
    if not np.all(np.isfinite(matrix)):
        raise InvalidInput("vector contains NaN or infinity")
    return matrix
