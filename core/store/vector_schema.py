"""The vector tables' names, the index on their partitions and the reads of sqlite-vec 0.1.x's own layout (which
partition holds which row): what a migration and the packs need of the vector layout, kept apart from
core.store.vectors so that the migrations (which db imports) never import what imports db."""
from __future__ import annotations

from typing import Literal

import apsw
import numpy as np

Table = Literal["memory", "episode"]
VEC_TABLES: dict[Table, str] = {"memory": "memory_vec", "episode": "episode_vec"}
PARTITION_COLUMN = "partition00"  # sqlite-vec 0.1.x's name for the partition key in its <table>_chunks


def index_partitions(conn: apsw.Connection, table: str) -> bool:
    """Index the partition key of a vec0 table's chunk list; True when the index is there.

    sqlite-vec 0.1.x finds a partition's chunks by scanning every chunk row: with 512 clusters that scan
    cost ~0.7 ms per cluster probed, ten times the search inside the cluster. An index on its own shadow
    table is plain SQLite; a future layout without that column is simply left as it is."""
    if not has_partition_column(conn, table):
        return False
    conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_chunks_partition ON {table}_chunks({PARTITION_COLUMN})")
    return True


def has_partition_column(conn: apsw.Connection, table: str) -> bool:
    """Whether the table's chunk list has sqlite-vec 0.1.x's partition column (no such table: False)."""
    return PARTITION_COLUMN in {row[1] for row in conn.execute(f"PRAGMA table_info({table}_chunks)")}


def partitions(conn: apsw.Connection, table: str) -> list[int]:
    """Every partition key that holds a chunk (an indexed read of sqlite-vec's chunk list)."""
    return [int(p) for (p,) in conn.execute(
        f"SELECT DISTINCT {PARTITION_COLUMN} FROM {table}_chunks WHERE {PARTITION_COLUMN} IS NOT NULL")]


def partition_members(conn: apsw.Connection, table: str, partition: int) -> list[int]:
    """The ids in one partition, read from its chunks' rowid lists and validity bitmaps (sqlite-vec 0.1.x's
    layout: a chunk's slots hold int64 ids, a bit set for each slot in use)."""
    ids: list[int] = []
    for validity, rowids in conn.execute(
            f"SELECT validity, rowids FROM {table}_chunks WHERE {PARTITION_COLUMN} = ?", (int(partition),)):
        slots = np.frombuffer(rowids, dtype=np.int64)
        used = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:len(slots)].astype(bool)
        ids.extend(int(i) for i in slots[used])
    return ids


def partitions_of(conn: apsw.Connection, table: str, ids: list[int]) -> dict[int, int]:
    """id → the partition it sits in, for the ids the table holds."""
    found: dict[int, int] = {}
    for start in range(0, len(ids), 500):
        chunk = [int(i) for i in ids[start:start + 500]]
        marks = ",".join("?" * len(chunk))
        for i, p in conn.execute(f"SELECT r.rowid, c.{PARTITION_COLUMN} FROM {table}_rowids r JOIN {table}_chunks c "
                                 f"ON c.chunk_id = r.chunk_id WHERE r.rowid IN ({marks})", chunk):
            found[int(i)] = int(p)
    return found
