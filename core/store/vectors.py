"""Vectors in sqlite-vec (vec0) tables, keyed to memory and episode rows.

The store records which embedding model and dimension made its vectors; opening it with another
embedder raises EmbedderMismatch and offers a re-embed, so vectors of two models never mix.

Layout: a vec0 table of sign bits (`bit[D]`, 32x less data than floats) split into SHARDS partitions by
id, and a plain table of the float vectors. sqlite-vec 0.1.x searches by brute force and its top-k selection
costs O(rows x k), so a query asks each shard for its few Hamming-nearest rows (a cheap small k), and the
union — about as good as the global top few hundred — is rescored with exact cosine on the float vectors.
A large table is searched by every row's sign bits in numpy (core.store.vector_scan: clusters lose rows that mix
topics), the best rescored exactly; a coarsely clustered one (core.store.vector_clusters) by its nearest clusters.
A partition packed into one row of int8 codes (core.store.vector_packs) is scored from its pack instead of the
bit scan, and its best rows rescored the same way.
sqlite-vec's chunk list gets an index on its partition column (index_partitions), so a partition is found by a
lookup, not a scan of every chunk.
bench/recall.py measures the speed and the recall@10 against exact search on real sentence embeddings.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import numpy as np

from core.errors import EmbedderMismatch, InvalidInput, WorkStopped
from core.store import vector_clusters as clusters
from core.store import vector_packs, vector_scan
from core.store.vector_binding import (BINARY_LAYOUT, LAYOUT_KEY, Table, binding, bound_embedder, checked_matrix,
                                       read_meta, table_name as _table)
from core.store.vector_schema import VEC_TABLES, index_partitions

if TYPE_CHECKING:  # annotations only: nothing db imports needs this module
    from core.store.db import Database

SHARDS = 8  # partitions of the bit table; each query takes its per-shard top from every one
PER_SHARD_MIN = 40  # candidates per shard: 8 x 40 = 320 rows rescored for a k=10 query
OVERSAMPLE = 8  # a larger k rescores 8k rows in all (bench/recall.py: recall@10 against exact search)
RESCORED_PER_PARTITION_MIN = 4  # a clustered scan rescores 4x a probe's share (vector_clusters' note measures it)
MAX_CANDIDATES = 4096  # vec0's own limit on k
# Rows per vec0 chunk. A partition scan reads whole chunks and its top-k costs O(slots x k), empty slots
# included: at 100k rows a cluster holds ~200 rows, so 256-row chunks scan 3-4x faster than the default 1,024;
# at a million (~2,000 rows a cluster) they are ~1.3x slower, well inside that size's budget.
CHUNK_SIZE = 256
# Shards hold the whole table while it is small: scoring every row from packs is faster than the bit scan up to
# ~10k rows (2k: 0.74 vs 1.27 ms a query; 10k: 3.97 vs 3.71; 19k: 7.83 vs 4.24), so larger ones are not packed,
# and the idle-time upkeep clusters them.
SHARD_PACKS_UP_TO = 8000
PACKED_RESCORED_EXTRA = 16  # the packs' int8 scores rank the best k + 16 rows, which are rescored on their floats


def bind_embedder(db: Database, name: str, dimension: int) -> None:
    """Record the embedder on first use and create the vector tables; refuse a different one.

    Two processes may bind a fresh store at the same moment (the app open while `engram memory add` runs): the
    binding is read again under the write lock, so the second finds the first's and is refused only if it differs."""
    current = bound_embedder(db)
    if current is None:
        if isinstance(dimension, bool) or int(dimension) <= 0 or int(dimension) % 8:
            raise InvalidInput(f"embedding dimension must be a positive multiple of 8, not {dimension!r}")
        with db.transaction():  # BEGIN IMMEDIATE: no other process binds between this read and the write
            current = bound_embedder(db)
            if current is None:
                db.execute("INSERT INTO meta(key, value) VALUES ('embedder_name', ?), ('embedder_dimension', ?), "
                           "(?, ?)", (name, str(int(dimension)), LAYOUT_KEY, BINARY_LAYOUT))
                _create_tables(db, int(dimension))
                return
    if current != (name, dimension):
        raise EmbedderMismatch(
            f"this store's vectors were made by {current[0]} ({current[1]} dimensions), not {name} "
            f"({dimension}). Switch back, or re-embed the store with `engram memory reembed`.")


def _create_tables(db: Database, dimension: int) -> None:
    for table in VEC_TABLES.values():
        db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0(id INTEGER PRIMARY KEY, "
                   f"shard INTEGER PARTITION KEY, bits bit[{dimension}], chunk_size={CHUNK_SIZE})")
        db.execute(f"CREATE TABLE IF NOT EXISTS {table}_float(id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
        index_partitions(db.conn, table)


def upsert_vectors(db: Database, table: Table, ids: Sequence[int], vectors: np.ndarray) -> None:
    name = _table(table)
    vectors = checked_matrix(db, vectors, len(ids))
    keys = [int(i) for i in ids]
    with db.transaction():
        left = vector_packs.leaving(db, name, keys) if _has_bits(db) else {}
        touched = vector_scan.chunks_of(db, name, keys) if _has_bits(db) else set()  # where they leave
        db.conn.executemany(f"DELETE FROM {name} WHERE id = ?", [(i,) for i in keys])
        if not _has_bits(db):  # a store bound before the sharded layout: float vec0 only
            db.conn.executemany(f"INSERT INTO {name}(id, embedding) VALUES (?, ?)",
                                [(i, v.tobytes()) for i, v in zip(keys, vectors)])
            return
        centres = clusters.centroids(db, name)
        partitions = clusters.nearest_clusters(centres, vectors) if centres is not None else [i % SHARDS for i in keys]
        db.conn.executemany(f"INSERT INTO {name}(id, shard, bits) VALUES (?, ?, vec_bit(?))",
                            [(i, int(p), b.tobytes()) for i, p, b in zip(keys, partitions, sign_bits(vectors))])
        vector_scan.changed(db, name, touched | vector_scan.chunks_of(db, name, keys))  # and where they land
        db.conn.executemany(f"INSERT OR REPLACE INTO {name}_float(id, embedding) VALUES (?, ?)",
                            [(i, v.tobytes()) for i, v in zip(keys, vectors)])
        vector_packs.touch(db, name, left, {i: (int(p), v) for i, p, v in zip(keys, partitions, vectors)},
                           vectors.shape[1])
        if centres is not None:
            return
        rows = _rows(db, name)
        if rows >= clusters.CLUSTER_AT:  # the idle-time upkeep never ran: clustered here, not left to the bit scan
            clusters.cluster(db, name, sign_bits)  # packs every cluster
        elif rows > SHARD_PACKS_UP_TO:
            vector_packs.drop(db, name)  # read by no query at this size: not kept up either


def ids_without_vectors(db: Database, table: Table) -> list[int]:
    """Rows that have no vector (a process killed between two commits left them so); none before binding."""
    if bound_embedder(db) is None:
        return []
    name = _table(table)
    rows = "memories" if table == "memory" else "episodes"
    held = f"{name}_float" if _has_bits(db) else name
    return [r["id"] for r in db.query(f"SELECT id FROM {rows} WHERE id NOT IN (SELECT id FROM {held}) ORDER BY id")]


def delete_vectors(db: Database, table: Table, ids: Iterable[int]) -> None:
    if bound_embedder(db) is None:
        return
    name = _table(table)
    keys = [(int(i),) for i in ids]
    with db.transaction():
        left = vector_packs.leaving(db, name, [k for (k,) in keys]) if _has_bits(db) else {}
        touched = vector_scan.chunks_of(db, name, [k for (k,) in keys]) if _has_bits(db) else set()
        db.conn.executemany(f"DELETE FROM {name} WHERE id = ?", keys)
        if _has_bits(db):
            vector_scan.changed(db, name, touched)
            db.conn.executemany(f"DELETE FROM {name}_float WHERE id = ?", keys)
            vector_packs.touch(db, name, left, {}, _dimension(db))


@dataclass(frozen=True)
class Upkeep:
    clustered: int  # tables clustered (each cluster packed as it was made)
    packed: int  # partitions packed besides


def upkeep(db: Database) -> Upkeep:
    """Idle-time and bulk-write upkeep of recall's vector index: a table grown past what its packed shards serve
    well is clustered, then every partition without a pack is packed. Run by the daily forgetting job, at the end
    of an import and a re-embed, and by `engram doctor --rebuild`; recall is right without it, only slower."""
    if bound_embedder(db) is None or not _has_bits(db):
        return Upkeep(0, 0)
    grown = [name for name in VEC_TABLES.values()
             if clusters.centroids(db, name) is None and _rows(db, name) > SHARD_PACKS_UP_TO]
    for name in grown:
        clusters.cluster(db, name, sign_bits)
    return Upkeep(len(grown), pack_partitions(db))


def _rows(db: Database, name: str) -> int:
    return int(db.scalar(f"SELECT count(*) FROM {name}_float") or 0)


def pack_partitions(db: Database) -> int:
    """Pack every partition of both vector tables that has no pack (core.store.vector_packs); returns how many.
    Idle-time and bulk-write upkeep: recall is right without it, only slower on the partitions it has not packed."""
    if bound_embedder(db) is None or not _has_bits(db):
        return 0
    built = 0
    for table, name in VEC_TABLES.items():
        if _packs_read(db, name):
            built += vector_packs.pack_missing(db, name, partial(get_vectors, db, table))
    return built


def _packs_read(db: Database, name: str) -> bool:
    """False for a table whose packs no query would read: unclustered and past SHARD_PACKS_UP_TO rows."""
    if clusters.centroids(db, name) is not None:
        return True
    return _rows(db, name) <= SHARD_PACKS_UP_TO


def repack(db: Database) -> Upkeep:
    """Build every pack again from the float vectors (`engram doctor --rebuild`: they are derived data), and
    cluster a table that has grown past its shards."""
    with db.transaction():
        for name in VEC_TABLES.values():
            vector_packs.drop(db, name)
    return upkeep(db)


def knn(db: Database, table: Table, query: np.ndarray, k: int, *, exact: bool = False,
        keep: Callable[[list[int]], set[int]] | None = None) -> list[tuple[int, float]]:
    """The k nearest rows as (id, cosine distance), nearest first.

    The partitions nearest the query (every shard while the table is small), each scored from its pack
    (core.store.vector_packs) or, without one, by sqlite-vec's bit scan; the best rescored exactly on their float
    vectors. `exact` scans every float vector instead. `keep(ids)`: those of the ids the caller can use (recall:
    the rows not forgotten). Rows scored from packs that it refuses are passed over before any is rescored, so
    a search past mostly archived rows costs no deeper search; bit-scanned rows may still come back unkept."""
    bound = binding(db)
    if bound is None or k <= 0:
        return []
    vector = bound.checked(query, 1)[0]
    name = _table(table)
    if not bound.sharded:
        return _legacy_float_knn(db, name, vector, min(int(k), MAX_CANDIDATES))
    if exact:
        return _exact_knn(db, name, vector, int(k))
    scanned = _from_full_scan(db, name, vector, int(k), keep)
    if scanned is not None:
        return scanned
    plan = _scan_plan(db, name, vector, int(k))
    packs = vector_packs.read(db, name, plan.partitions, len(vector))  # none for a large unclustered table
    found = _from_packs(db, name, vector, list(packs.values()), int(k), keep) if packs else {}
    rest = [p for p in plan.partitions if p not in packs]
    if rest:
        found.update(_from_bit_scan(db, name, vector, rest, plan, int(k)))
    return sorted(found.items(), key=lambda item: (item[1], item[0]))[:int(k)]


def _from_full_scan(db: Database, name: str, vector: np.ndarray, k: int,
                    keep: Callable[[list[int]], set[int]] | None) -> list[tuple[int, float]] | None:
    """A large table's k nearest (that `keep` keeps): every row's sign bits compared with the query's, the best
    rescored exactly (core.store.vector_scan); None where the partitions serve better (_scans_every_row)."""
    if not _scans_every_row(db, name):
        return None
    bits = vector_scan.table_bits(db, name, len(vector))
    if bits is None:
        return None
    near = vector_scan.nearest(bits, vector, *vector_scan.plan(len(bits), k))
    scored = _cosine_distances(db, f"{name}_float", vector, [int(i) for i in near])
    ids = np.fromiter(scored, dtype=np.int64, count=len(scored))
    distance = np.fromiter(scored.values(), dtype=np.float64, count=len(scored))
    best = _best_kept(ids, -distance, k, keep or set, k)  # without `keep`, one round keeps them all
    return sorted(((i, scored[i]) for i in best), key=lambda item: (item[1], item[0]))


def _scans_every_row(db: Database, name: str) -> bool:
    """Whether a query compares every row's bits rather than scoring its partitions: a table too large for its
    packed shards, or clustered so finely that a query's probes leave most of it out (the clusters miss rows of
    mixed topics: core.store.vector_scan). A table whose probes cover most of it is scored from its packs."""
    centres = clusters.centroids(db, name)
    if centres is None:
        return _rows_bound(db, name) > SHARD_PACKS_UP_TO
    probes, _ = clusters.probe_plan(len(centres), _rows_bound(db, name))
    return 2 * probes < len(centres)


def _rows_bound(db: Database, name: str) -> int:
    """An upper bound of the table's rows in one seek (the largest id: deletions leave it higher)."""
    return int(db.scalar(f"SELECT max(id) FROM {name}_float") or 0)


@dataclass(frozen=True)
class _ScanPlan:
    partitions: list[int]  # nearest first
    per_partition: int  # Hamming-nearest rows a bit scan passes on from each partition
    rescored: int  # of those, how many are rescored on their float vectors


def _scan_plan(db: Database, name: str, vector: np.ndarray, k: int) -> _ScanPlan:
    """Which partitions a query scans — every id-modulo shard, or the nearest clusters once the table is
    clustered — and how many rows a bit scan keeps of them."""
    centres = clusters.centroids(db, name)
    if centres is None:
        partitions, minimum, floor = list(range(SHARDS)), PER_SHARD_MIN, SHARDS * PER_SHARD_MIN
    else:
        count, minimum = clusters.probe_plan(len(centres), _rows_bound(db, name))
        partitions, floor = clusters.probes(centres, vector, count), minimum * RESCORED_PER_PARTITION_MIN
    per_partition = min(MAX_CANDIDATES, max(minimum, -(-OVERSAMPLE * k // len(partitions))))
    return _ScanPlan(partitions, per_partition, min(MAX_CANDIDATES, max(floor, OVERSAMPLE * k)))


def _from_packs(db: Database, name: str, vector: np.ndarray, packs: list[vector_packs.Pack], k: int,
                keep: Callable[[list[int]], set[int]] | None = None) -> dict[int, float]:
    """Every row of the packs scored on its int8 codes; the best few (that `keep` keeps) rescored exactly."""
    ids, scores = vector_packs.similarities(packs, vector)
    wanted = min(len(ids), k + PACKED_RESCORED_EXTRA)
    best = _best_kept(ids, scores, wanted, keep or set, min(k, wanted))  # without `keep`, one round keeps them all
    return _cosine_distances(db, f"{name}_float", vector, best)


def _best_kept(ids: np.ndarray, scores: np.ndarray, wanted: int, keep: Callable[[list[int]], set[int]],
               needed: int) -> list[int]:
    """Up to `wanted` best-scored ids that `keep` keeps, best first: it is asked about `wanted` ids, then 4x as many
    each time while fewer than `needed` were kept (the rows past `needed` only widen the exact rescoring, so a few
    refused among the first do not cost a second, larger round). Only the best `end` are put in order each time
    (a partition, then a sort of those)."""
    chosen: list[int] = []
    asked: set[int] = set()  # a tie at a round's edge may fall on either side of it: no row is asked twice
    start, step = 0, max(wanted, 1)
    while len(chosen) < needed and start < len(ids):
        end = min(len(ids), start + step)
        best = np.argpartition(-scores, end - 1)[:end] if end < len(ids) else np.arange(len(ids))
        order = best[np.argsort(-scores[best], kind="stable")]
        batch = [i for i in (int(j) for j in ids[order[start:end]]) if i not in asked]
        asked.update(batch)
        kept = keep(batch)
        chosen += [i for i in batch if i in kept]
        start, step = end, step * 4
    return chosen[:wanted]


def _from_bit_scan(db: Database, name: str, vector: np.ndarray, partitions: list[int], plan: _ScanPlan,
                   k: int) -> dict[int, float]:
    near = " UNION ALL ".join(f"SELECT id, distance FROM {name} WHERE bits MATCH vec_bit(?1) AND "
                              f"k = {plan.per_partition} AND shard = {int(p)}" for p in partitions)
    rows = db.execute(  # one statement: partition scans, the Hamming-best of them, cosine on their floats; the scans
        # stay a subquery of their own (MATERIALIZED): flattened, a lone one would take best's LIMIT beside its k
        f"WITH near AS MATERIALIZED ({near}), best AS (SELECT id FROM near ORDER BY distance, id LIMIT ?4) "
        f"SELECT f.id, vec_distance_cosine(f.embedding, ?2) AS d FROM best "
        f"JOIN {name}_float f ON f.id = best.id ORDER BY d, f.id LIMIT ?3",
        (sign_bits(vector[None, :])[0].tobytes(), vector.tobytes(), int(k), plan.rescored)).fetchall()
    return {int(i): float(d) for i, d in rows}


def distances(db: Database, table: Table, query: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
    """Exact cosine distance from the query to each given row that has a vector."""
    bound = binding(db)
    if bound is None or not ids:
        return {}
    return _cosine_distances(db, bound.floats(table), bound.checked(query, 1)[0], list(ids))


def _cosine_distances(db: Database, source: str, vector: np.ndarray, ids: list[int]) -> dict[int, float]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"SELECT id, vec_distance_cosine(embedding, ?) FROM {source} WHERE id IN ({marks})",
                      [vector.tobytes(), *(int(i) for i in ids)]).fetchall()
    return {int(i): float(d) for i, d in rows}


def sign_bits(vectors: np.ndarray) -> np.ndarray:
    """One bit per dimension (1 where the value is positive), packed as sqlite-vec's bit vectors."""
    return np.packbits(np.asarray(vectors) > 0, axis=1, bitorder="little")


def get_vectors(db: Database, table: Table, ids: Sequence[int]) -> dict[int, np.ndarray]:
    if bound_embedder(db) is None or not ids:
        return {}
    marks = ",".join("?" * len(ids))
    source = f"{_table(table)}_float" if _has_bits(db) else _table(table)
    rows = db.execute(f"SELECT id, embedding FROM {source} WHERE id IN ({marks})", [int(i) for i in ids]).fetchall()
    return {int(i): np.frombuffer(blob, dtype=np.float32) for i, blob in rows}


def reembed(db: Database, name: str, dimension: int, texts_for: Callable[[Table], Iterable[tuple[int, str]]],
            embed: Callable[[list[str]], np.ndarray], batch: int = 256,
            stop: Callable[[], bool] | None = None, then: Callable[[], None] | None = None) -> int:
    """Drop every vector and embed all rows again with a new model; returns the rows embedded.

    The rows are embedded first, outside any transaction (minutes with a large model: the chat goes on writing
    meanwhile); then one transaction swaps every vector and the binding, embedding again only the rows added or
    edited in between. A failure or a quit half-way leaves the old model's vectors and binding as they were, not
    a store bound to the new model with half its rows missing from recall. `stop` is asked before each batch of
    the first part (the app quitting): WorkStopped, and nothing has changed. `then` runs inside that transaction,
    once the new model is bound: the caller's other vectors swapped with these (a turn's sentences)."""
    ready = {table: _embedded(list(texts_for(table)), embed, batch, stop) for table in VEC_TABLES}
    done = 0
    with db.transaction():
        for table in VEC_TABLES.values():
            db.execute(f"DROP TABLE IF EXISTS {table}")
            db.execute(f"DROP TABLE IF EXISTS {table}_float")
            clusters.drop(db, table)
            vector_scan.changed(db, table)
        db.execute("DELETE FROM meta WHERE key IN ('embedder_name', 'embedder_dimension', ?)", (LAYOUT_KEY,))
        bind_embedder(db, name, dimension)
        for table in VEC_TABLES:
            rows = list(texts_for(table))
            made = ready[table]
            made.update(_embedded([(i, t) for i, t in rows if i not in made or made[i][0] != t], embed, batch))
            for start in range(0, len(rows), batch):
                chunk = [i for i, _ in rows[start:start + batch]]
                upsert_vectors(db, table, chunk, np.stack([made[i][1] for i in chunk]))
            done += len(rows)
        if then is not None:
            then()
        upkeep(db)
    return done


def _embedded(rows: list[tuple[int, str]], embed: Callable[[list[str]], np.ndarray],
              batch: int, stop: Callable[[], bool] | None = None) -> dict[int, tuple[str, np.ndarray]]:
    """id → (the text embedded, its vector), embedded `batch` rows at a time."""
    made: dict[int, tuple[str, np.ndarray]] = {}
    for start in range(0, len(rows), batch):
        if stop is not None and stop():
            raise WorkStopped(f"re-embedding stopped after {len(made)} of {len(rows)} rows; nothing was changed")
        chunk = rows[start:start + batch]
        for (i, text), vector in zip(chunk, np.asarray(embed([t for _, t in chunk]), dtype=np.float32)):
            made[int(i)] = (text, vector)
    return made


def _exact_knn(db: Database, name: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    rows = db.execute(f"SELECT id, vec_distance_cosine(embedding, ?) AS d FROM {name}_float ORDER BY d, id LIMIT ?",
                      (vector.tobytes(), k)).fetchall()
    return [(int(i), float(d)) for i, d in rows]


def _legacy_float_knn(db: Database, name: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    rows = db.execute(f"SELECT id, distance FROM {name} WHERE embedding MATCH ? AND k = ? ORDER BY distance",
                      (vector.tobytes(), k)).fetchall()
    return [(int(i), float(d)) for i, d in rows]


def _dimension(db: Database) -> int:
    bound = bound_embedder(db)
    return bound[1] if bound else 0


def _has_bits(db: Database) -> bool:
    return read_meta(db).get(LAYOUT_KEY) == BINARY_LAYOUT
