"""The vector tables' names and the index on their partitions: what a migration needs of the vector layout,
kept apart from core.store.vectors so that the migrations (which db imports) never import what imports db."""
from __future__ import annotations

import apsw

VEC_TABLES: dict[str, str] = {"memory": "memory_vec", "episode": "episode_vec"}
PARTITION_COLUMN = "partition00"  # sqlite-vec 0.1.x's name for the partition key in its <table>_chunks


def index_partitions(conn: apsw.Connection, table: str) -> bool:
    """Index the partition key of a vec0 table's chunk list; True when the index is there.

    sqlite-vec 0.1.x finds a partition's chunks by scanning every chunk row: with 512 clusters that scan
    cost ~0.7 ms per cluster probed, ten times the search inside the cluster. An index on its own shadow
    table is plain SQLite; a future layout without that column is simply left as it is."""
    columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table}_chunks)")}
    if PARTITION_COLUMN not in columns:
        return False
    conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_chunks_partition ON {table}_chunks({PARTITION_COLUMN})")
    return True
