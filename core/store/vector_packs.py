"""Each partition of a vector table packed into one row: its ids, int8 codes and a scale a row (IVF-SQ8).

Why: sqlite-vec 0.1.x scans a partition through its virtual table at ~0.25 ms a partition with a top-k selection
of O(rows x k), and the float rows it passes on are then read one B-tree lookup each. A query probes 12–16
partitions. A pack is one row (~80 KB for a cluster of 200 at 100k rows) read in one step and scored in one numpy
product; only the best few are rescored on their float vectors, so the answer is as exact as before.

The packs are derived data in the same file. Every write to a vector table updates or drops the packs of the
partitions it touched, in its own transaction, so no reader ever sees a stale pack; a partition without one is
scanned by sqlite-vec as before. A bulk write drops the packs it touches (rewriting hundreds of packs a batch would
cost more than the batch), and `pack_missing` builds them again: the daily forgetting job, the end of an import,
a re-embed and `engram doctor --rebuild` call it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

import apsw
import numpy as np

from core.store.vector_schema import has_partition_column, partition_members, partitions, partitions_of

if TYPE_CHECKING:  # annotations only
    from core.store.db import Database

UPDATE_BUDGET = 4 << 20  # bytes of packs a write may rewrite in place; past it the touched packs are dropped
CODE_MAX = 127.0


@dataclass(frozen=True)
class Pack:
    ids: np.ndarray  # int64, one a row
    codes: np.ndarray  # int8 (rows, dimension): the vector / scale, rounded
    scales: np.ndarray  # float32, one a row

    def __len__(self) -> int:
        return len(self.ids)


def encode(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes of each row's unit vector and a scale a row: the largest magnitude maps to 127 (a cosine off by
    ~5e-4 at 384 dimensions). Unit rows, so the codes rank rows by cosine whatever the stored vectors' lengths."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    units = vectors / np.where(norms > 0, norms, 1.0)
    largest = np.abs(units).max(axis=1) if len(units) else np.zeros(0, dtype=np.float32)
    scales = np.where(largest > 0, largest / CODE_MAX, 1.0).astype(np.float32)
    return np.rint(units / scales[:, None]).astype(np.int8), scales


def similarities(packs: Iterable[Pack], query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, approximate cosine × |query|) over every row of the packs; a pack at a time, so each one's float
    copy of its codes stays in cache (one copy of them all cost twice as much at 100k rows)."""
    packs = [p for p in packs if len(p)]
    if not packs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    query = np.asarray(query, dtype=np.float32)
    scores = [(p.codes.astype(np.float32) @ query) * p.scales for p in packs]
    return np.concatenate([p.ids for p in packs]), np.concatenate(scores)


def read(db: Database, name: str, keys: Iterable[int], dimension: int) -> dict[int, Pack]:
    """The packs of these partitions that exist and are whole, by partition key. A pack whose parts disagree (a
    damaged row) is left out, so its partition is bit-scanned like one never packed."""
    keys = [int(k) for k in keys]
    if not keys or not _has_table(db, name):
        return {}
    marks = ",".join("?" * len(keys))
    try:
        rows = db.execute(f"SELECT partition, ids, codes, scales FROM {name}_packs WHERE partition IN ({marks})",
                          keys).fetchall()
    except apsw.SQLError as exc:  # another process dropped the table since the check (a re-embed, doctor --rebuild)
        if "no such table" not in str(exc):
            raise
        return {}
    decoded = {int(p): _decoded(ids, codes, scales, dimension) for p, ids, codes, scales in rows}
    return {p: pack for p, pack in decoded.items() if pack is not None}


def leaving(db: Database, name: str, ids: list[int]) -> dict[int, int]:
    """id → the partition it is in now, for a write about to move or remove it (nothing to track without packs)."""
    return partitions_of(db.conn, name, ids) if _has_table(db, name) else {}


def touch(db: Database, name: str, removed: Mapping[int, int], added: Mapping[int, tuple[int, np.ndarray]],
          dimension: int) -> None:
    """Bring the packs in line with a write: `removed` id → the partition it left, `added` id → (partition, vector).
    Call inside the write's transaction."""
    if not _has_table(db, name):
        return
    touched = sorted({*removed.values(), *(p for p, _ in added.values())})
    if not touched:
        return
    marks = ",".join("?" * len(touched))
    sizes = dict(db.execute(f"SELECT partition, length(codes) FROM {name}_packs WHERE partition IN ({marks})",
                            touched).fetchall())
    if sum(sizes.values()) > UPDATE_BUDGET:  # a bulk write: pack_missing builds them again
        db.conn.executemany(f"DELETE FROM {name}_packs WHERE partition = ?", [(p,) for p in sizes])
        return
    for partition in sizes:
        gone = {i for i, p in removed.items() if p == partition} | set(added)
        new = {i: v for i, (p, v) in added.items() if p == partition}
        _rewrite(db, name, partition, gone, new, dimension)


def pack_missing(db: Database, name: str, vectors_of: Callable[[list[int]], dict[int, np.ndarray]]) -> int:
    """Build the pack of every partition that has none, one small transaction each (a writer waits a few ms at
    most, and work cut short resumes where it stopped: what is packed stays packed); returns how many."""
    if not has_partition_column(db.conn, name):
        return 0
    _create_table(db, name)
    have = {int(p) for (p,) in db.execute(f"SELECT partition FROM {name}_packs")}
    built = 0
    for partition in partitions(db.conn, name):
        if partition in have:
            continue
        with db.transaction():  # members and vectors read under the write lock: no write lands in between
            ids = partition_members(db.conn, name, partition)
            found = vectors_of(ids)
            kept = [i for i in ids if i in found]
            if kept:
                write(db, name, partition, np.array(kept, dtype=np.int64), np.stack([found[i] for i in kept]))
                built += 1
    return built


def write(db: Database, name: str, partition: int, ids: np.ndarray, vectors: np.ndarray) -> None:
    codes, scales = encode(vectors)
    db.execute(f"INSERT OR REPLACE INTO {name}_packs(partition, ids, codes, scales) VALUES (?, ?, ?, ?)",
               (int(partition), np.ascontiguousarray(ids, dtype=np.int64).tobytes(), codes.tobytes(),
                scales.tobytes()))


def start(db: Database, name: str) -> None:
    """Make the (empty) pack table: from now on writes keep packs and pack_missing builds them."""
    _create_table(db, name)


def drop(db: Database, name: str) -> None:
    if _has_table(db, name):
        db.execute(f"DROP TABLE {name}_packs")


def _rewrite(db: Database, name: str, partition: int, gone: set[int], new: Mapping[int, np.ndarray],
             dimension: int) -> None:
    pack = read(db, name, [partition], dimension).get(partition)
    if pack is not None:
        keep = ~np.isin(pack.ids, np.fromiter(gone, dtype=np.int64, count=len(gone)))
        ids = np.concatenate([pack.ids[keep], np.fromiter(new, dtype=np.int64, count=len(new))])
    if pack is None or not len(ids):  # damaged (pack_missing builds it again), or emptied
        db.execute(f"DELETE FROM {name}_packs WHERE partition = ?", (int(partition),))
        return
    codes, scales = encode(np.stack(list(new.values()))) if new else (pack.codes[:0], pack.scales[:0])
    db.execute(f"UPDATE {name}_packs SET ids = ?, codes = ?, scales = ? WHERE partition = ?",
               (ids.tobytes(), np.concatenate([pack.codes[keep], codes]).tobytes(),
                np.concatenate([pack.scales[keep], scales]).tobytes(), int(partition)))


def _decoded(ids: bytes, codes: bytes, scales: bytes, dimension: int) -> Pack | None:
    if not all(isinstance(b, bytes) for b in (ids, codes, scales)) or len(ids) % 8:
        return None
    rows = len(ids) // 8
    if len(codes) != rows * dimension or len(scales) != rows * 4:
        return None
    return Pack(np.frombuffer(ids, dtype=np.int64), np.frombuffer(codes, dtype=np.int8).reshape(rows, dimension),
                np.frombuffer(scales, dtype=np.float32))


def _create_table(db: Database, name: str) -> None:
    db.execute(f"CREATE TABLE IF NOT EXISTS {name}_packs(partition INTEGER PRIMARY KEY, ids BLOB NOT NULL, "
               "codes BLOB NOT NULL, scales BLOB NOT NULL)")


def _has_table(db: Database, name: str) -> bool:
    return db.scalar("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", (f"{name}_packs",)) is not None
