"""Inverted-file clustering of a vector table: search a few clusters near the query instead of every row.

sqlite-vec 0.1.x scans every bit vector of the partitions a query names (~60 ns a row here), so a store of a
million rows would cost ~60 ms a query. Once a table outgrows its packed shards (core.store.vectors.upkeep, in idle
time), its vectors are grouped by spherical k-means into CLUSTERS clusters (kept as one matrix in
`<table>_centroids`); each row's vec0 partition key becomes its nearest centroid, new rows join their nearest
cluster, and a query scans only the clusters whose centroids are nearest to it — while the clusters are small,
enough of them to score MIN_SCANNED rows. bench/recall.py measures the recall@10 against exact search.

Centroids are learnt once from the rows present at that point; later rows only join clusters, which then grow.
What limited recall was not the centroids (re-learnt from all 100k or all 1M rows they gave the same recall in a
simulation of this scan) but how few rows each scanned cluster passed on by Hamming distance: 80 of ~200 rows at
100k gave 0.985 of the exact top 10, 80 of ~2,000 at a million 0.94. So the scan is planned from the clusters'
average size (probe_plan): more probes and a share of each probed cluster, and four times that rescored exactly.
Measured (100k real MiniLM vectors): 12 probes x 160 rows, 640 rescored: 0.998 in 3.1 ms p95 of vector search
(was 1.8 ms at 0.985); a million (100k real + 900k noisy copies): 16 x 195, 780 rescored: 0.988 (was 0.94) with
recall p95 21 ms; a sixth of each cluster instead of a tenth gave 0.9955 but 29 ms.

Those figures were on sentences from one word list. On real conversational text (bench/realstore.py: turns of two
or three sentences of LoCoMo and BEAM, 2026-11-29) a turn mixes topics and its cluster is chosen by all of them:
the exact top 10 of the data's questions lay in the 12 nearest clusters for 0.78 of them (64: 0.91, 256: 0.986),
at 100k rows as at a million. So a table whose probes would leave most of it out is no longer searched through its
clusters but by every row's sign bits (core.store.vector_scan, core.store.vectors._scans_every_row); the clusters
and their packs still serve a table clustered coarsely enough that its probes cover most of it.
"""
from __future__ import annotations

import math
import uuid
from typing import TYPE_CHECKING

import numpy as np

from core.store import vector_packs

if TYPE_CHECKING:  # annotations only
    from core.store.db import Database

# Rows past which a write clusters a table itself: only a store whose idle-time upkeep never ran gets this far
# unclustered (clustering 20k rows holds the write lock ~3 s, inside that write).
CLUSTER_AT = 20_000
CLUSTERS = 512  # centroids: 100k rows make clusters of ~200 (one 256-row vec0 chunk), a million ~2,000
PROBES = 12  # clusters scanned per query while clusters are small (≤ LARGE_CLUSTER rows on average)
PROBES_LARGE = 16  # ... and once they have grown past it
LARGE_CLUSTER = 1000
MIN_SCANNED = 1000  # rows a query scores at the least: clustered at 8k rows (clusters of ~16), it probes 64
PER_PROBE_MIN = 160  # Hamming-nearest rows passed on from each scanned cluster; sqlite-vec's top-k is O(rows x k)
PER_PROBE_SHARE = 10  # ... or a tenth of an average cluster, whichever is more
PER_PROBE_MAX = 1024
CLUSTER_BASE = 1000  # partition keys of clusters start here, clear of the unclustered id-modulo shards
ITERATIONS = 10
SAMPLE = 50_000  # rows k-means learns from; the rest are only assigned


def centroids(db: Database, name: str) -> np.ndarray | None:
    """The table's centroids (rows of unit vectors), or None while it is not clustered.

    Every query needs them and reading the matrix costs about a millisecond, so it is kept on the
    connection for as long as the stamp that cluster() writes beside it is unchanged."""
    stamp = db.scalar("SELECT value FROM meta WHERE key = ?", (_stamp_key(name),))
    cached = db.memo.get(_stamp_key(name))
    if stamp is not None and cached is not None and cached[0] == stamp:
        return cached[1]
    if not _has_centroid_table(db, name):
        return None
    row = db.query_one(f"SELECT clusters, matrix FROM {name}_centroids WHERE id = 1")
    centres = np.frombuffer(row["matrix"], dtype=np.float32).reshape(int(row["clusters"]), -1) if row else None
    if stamp is not None and centres is not None:
        db.memo[_stamp_key(name)] = (stamp, centres)
    return centres


def nearest_clusters(centres: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Each vector's nearest centroid, as a partition key."""
    return CLUSTER_BASE + np.argmax(np.asarray(vectors, dtype=np.float32) @ centres.T, axis=1)


def probe_plan(clusters: int, rows: int) -> tuple[int, int]:
    """(clusters to scan, Hamming-nearest rows to take from each) for a table of `rows` in `clusters` clusters."""
    average = rows / max(clusters, 1)
    probes = PROBES if average <= LARGE_CLUSTER else PROBES_LARGE
    if average > 0:  # small clusters: enough of them to score MIN_SCANNED rows (probes() keeps to those there are)
        probes = max(probes, math.ceil(MIN_SCANNED / average))
    return probes, int(min(PER_PROBE_MAX, max(PER_PROBE_MIN, average // PER_PROBE_SHARE)))


def probes(centres: np.ndarray, query: np.ndarray, count: int | None = None) -> list[int]:
    """Partition keys of the `count` clusters nearest the query, nearest first."""
    similarity = centres @ query
    count = min(count or PROBES, len(centres))
    top = np.argpartition(-similarity, count - 1)[:count]
    return [CLUSTER_BASE + int(i) for i in top[np.argsort(-similarity[top])]]


def cluster(db: Database, name: str, bits_of, clusters: int | None = None, seed: int = 0) -> int:
    """Learn centroids from the table's float vectors and move every row into its nearest cluster's
    partition; returns the number of clusters. `bits_of(matrix)` packs vectors as the vec0 column wants.

    The centroids are learnt before the write lock is taken (seconds at 20k rows); the rows are then read again
    under it, so a row another process wrote meanwhile joins its nearest cluster like every other one."""
    _, sample = _all_vectors(db, name)
    if len(sample) == 0:
        return 0
    centres = kmeans(sample, min(clusters or CLUSTERS, len(sample)), seed=seed)
    with db.transaction():
        ids, matrix = _all_vectors(db, name)
        if len(ids) == 0:
            return 0
        keys = nearest_clusters(centres, matrix)
        db.execute(f"CREATE TABLE IF NOT EXISTS {name}_centroids(id INTEGER PRIMARY KEY CHECK (id = 1), "
                   "clusters INTEGER NOT NULL, matrix BLOB NOT NULL)")  # one row: one read per query
        db.execute(f"INSERT OR REPLACE INTO {name}_centroids(id, clusters, matrix) VALUES (1, ?, ?)",
                   (len(centres), np.ascontiguousarray(centres, dtype=np.float32).tobytes()))
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (_stamp_key(name), uuid.uuid4().hex))
        db.conn.executemany(f"DELETE FROM {name} WHERE id = ?", [(int(i),) for i in ids])
        db.conn.executemany(f"INSERT INTO {name}(id, shard, bits) VALUES (?, ?, vec_bit(?))",
                            [(int(i), int(k), b.tobytes()) for i, k, b in zip(ids, keys, bits_of(matrix))])
        _pack(db, name, ids, matrix, keys)
    return len(centres)


def _pack(db: Database, name: str, ids: np.ndarray, matrix: np.ndarray, keys: np.ndarray) -> None:
    """Every cluster's pack, from the vectors in hand (the shards' packs are gone with the shards)."""
    vector_packs.drop(db, name)
    vector_packs.start(db, name)
    order = np.argsort(keys, kind="stable")
    starts = np.flatnonzero(np.r_[True, keys[order][1:] != keys[order][:-1]])
    for first, last in zip(starts, [*starts[1:], len(order)]):
        rows = order[first:last]
        vector_packs.write(db, name, int(keys[rows[0]]), ids[rows], matrix[rows])


def kmeans(matrix: np.ndarray, count: int, *, seed: int = 0, iterations: int = ITERATIONS) -> np.ndarray:
    """Spherical k-means (cosine): `count` unit centroids learnt from at most SAMPLE rows."""
    rng = np.random.default_rng(seed)
    sample = matrix if len(matrix) <= SAMPLE else matrix[rng.choice(len(matrix), SAMPLE, replace=False)]
    centres = sample[rng.choice(len(sample), count, replace=False)].astype(np.float32)
    for _ in range(iterations):
        assigned = np.argmax(sample @ centres.T, axis=1)
        sums = np.zeros_like(centres)
        np.add.at(sums, assigned, sample)
        norms = np.linalg.norm(sums, axis=1)
        filled = norms > 0  # an empty cluster keeps its old centroid
        centres[filled] = sums[filled] / norms[filled, None]
    return centres


def drop(db: Database, name: str) -> None:
    db.execute(f"DROP TABLE IF EXISTS {name}_centroids")
    vector_packs.drop(db, name)
    db.execute("DELETE FROM meta WHERE key = ?", (_stamp_key(name),))


def _stamp_key(name: str) -> str:
    return f"{name}_centroids_stamp"


def _all_vectors(db: Database, name: str) -> tuple[np.ndarray, np.ndarray]:
    rows = db.execute(f"SELECT id, embedding FROM {name}_float ORDER BY id").fetchall()
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    return (np.array([i for i, _ in rows], dtype=np.int64),
            np.stack([np.frombuffer(b, dtype=np.float32) for _, b in rows]))


def _has_centroid_table(db: Database, name: str) -> bool:
    found = db.scalar("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", (f"{name}_centroids",))
    return found is not None
