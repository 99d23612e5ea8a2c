"""Every row of a large vector table compared with the query by Hamming distance on its sign bits, in numpy.

Why not the clusters (core.store.vector_clusters): on real conversational text a turn holds two or three topics, so
its vector sits between them and its cluster is chosen by all of them at once; a question about one topic finds the
turn in a cluster far down its list. On the real-text 100k store (bench/realstore.py) the 10 exact nearest rows lay
in the 12 nearest clusters for 0.78 of them, in 64 for 0.91 and needed half the clusters for 0.98. The sign bits of
every row ranked them far better: the exact top 10 were all among the 1,000 Hamming-nearest of 100k rows for 0.995
of them, of 1M rows (the 1M store's own vectors) among the 2,000 nearest for 0.996.

So a query compares every row's 48 bytes (384 dimensions) with its own: the Hamming-nearest are shortlisted, ranked
again by the query's floats against their bits, and the best of those rescored exactly on their float vectors
(plan(): 1,500 and 300 at 100k rows, ~3,000 and 600 at a million: 0.997 and 0.998 of the exact top 10 on the
real-text stores' vectors). The comparison took 1.8–3 ms at 100k rows; at a million all but the rescoring took
60 ms p50, 81 p95, on this 2-core machine at load 6 (bench/notes.md, 2026-11-29). The bits are read once from
sqlite-vec's own chunks (the vec0 table: no copy in the file; ~90 ms at 100k rows, the first query of a connection)
and kept on the connection with a stamp that every write to the table changes (changed()), so a write through
another connection or process is seen by the next query.
"""
from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only
    from core.store.db import Database

# Rows passed on up to 100k rows, times (rows / 100k) ** GROWTH past it (twice as many at a million):
SHORTLIST_AT_100K = 1500  # Hamming-nearest rows (the exact top 10 among 1,000 of 100k: 0.995, 2,000 of 1M: 0.996)
RESCORED_AT_100K = 300  # ... of those, the best by the query's floats against their bits, rescored exactly
GROWTH = 0.3
RESCORED_MAX = 4096


@dataclass(frozen=True)
class Bits:
    """A table's rows as sign bits: `words` is (64-bit words a row, rows), one word of every row contiguous."""
    ids: np.ndarray  # int64, one a row
    words: np.ndarray  # uint64 (words, rows)
    chunks: np.ndarray | None = None  # (chunk id, first row, rows) of each vec0 chunk, in order: see _reread

    def __len__(self) -> int:
        return len(self.ids)


def changed(db: Database, name: str, chunks: set[int] | None = None) -> None:
    """Mark the table's vectors as changed (inside the writing transaction): every connection's cache reloads.
    `chunks`: every vec0 chunk this write touched, when the writer knows them all (chunks_of, before a deletion and
    after an insertion); this connection's cache then reads those chunks again, not the whole table (a turn adds
    one row to a table of 10k turns in 512 chunks: ~11 ms of reading, at every turn)."""
    key = _stamp_key(name)
    before = db.scalar("SELECT value FROM meta WHERE key = ?", (key,))
    stamp = uuid.uuid4().hex
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, stamp))
    _note_touched(db, name, before, stamp, chunks)


def chunks_of(db: Database, name: str, ids: list[int]) -> set[int]:
    """The vec0 chunks holding these rows now."""
    found: set[int] = set()
    for start in range(0, len(ids), 500):
        part = [int(i) for i in ids[start:start + 500]]
        found.update(int(c) for (c,) in db.execute(
            f"SELECT DISTINCT chunk_id FROM {name}_rowids WHERE rowid IN ({','.join('?' * len(part))})", part))
    return found


def _note_touched(db: Database, name: str, before: object, stamp: str, chunks: set[int] | None) -> None:
    """Chain this write's chunks to those written through this connection since its cached bits were read (a
    rolled-back write leaves an entry no stamp matches, so nothing is read from it)."""
    key, cached = _touched_key(name), db.memo.get(_stamp_key(name))
    pending = db.memo.pop(key, None)
    if chunks is None:
        return  # a write that does not say what it touched: the next query reads every chunk
    if pending is not None and pending[1] == before:
        db.memo[key] = (pending[0], stamp, pending[2] | set(chunks))
    elif cached is not None and cached[0] == before:
        db.memo[key] = (before, stamp, set(chunks))


def plan(rows: int, k: int) -> tuple[int, int]:
    """(Hamming-nearest rows shortlisted, of those rescored exactly) for a k-nearest query over `rows` rows."""
    growth = max(1.0, rows / 100_000) ** GROWTH  # a smaller table keeps 100k's: its rows cost little
    rescored = min(RESCORED_MAX, max(math.ceil(RESCORED_AT_100K * growth), 8 * k))
    shortlist = max(math.ceil(SHORTLIST_AT_100K * growth), 5 * rescored)
    return min(rows, shortlist), min(rows, rescored)


def table_bits(db: Database, name: str, dimension: int) -> Bits | None:
    """Every row's sign bits, from the connection's cache while the table's stamp is unchanged; None when the
    table is not in sqlite-vec 0.1.x's chunk layout (the caller searches the old way)."""
    key = _stamp_key(name)
    stamp = db.scalar("SELECT value FROM meta WHERE key = ?", (key,))  # read before the bits: a write in between
    cached = db.memo.get(key)  # only makes the next query read them again
    if cached is not None and cached[0] == stamp:
        return cached[1]
    pending = db.memo.pop(_touched_key(name), None)
    bits = None
    if cached is not None and pending is not None and pending[0] == cached[0] and pending[1] == stamp:
        bits = _reread(db, name, dimension, cached[1], pending[2])  # only this connection wrote since
    if bits is None:
        bits = _read_chunks(db, name, dimension)
    if bits is not None:
        db.memo[key] = (stamp, bits)
    return bits


def nearest(bits: Bits, query: np.ndarray, shortlist: int, count: int) -> np.ndarray:
    """Ids of `count` rows near the query, best first: the `shortlist` nearest by Hamming distance of sign bits,
    ranked again by the query's own floats against their bits (an estimate of the cosine far closer than the
    Hamming distance: of 1,500 shortlisted at 100k, the best 300 so ranked held 0.997 of the exact top 10)."""
    query = np.asarray(query, dtype=np.float32)
    places = _hamming_nearest(hamming(bits, query), shortlist)
    if not len(places):
        return bits.ids[:0]
    estimate = _signed_sums(query, bits.words[:, places])
    best = np.argsort(-estimate, kind="stable")[:max(count, 0)]
    return bits.ids[places[best]]


def _hamming_nearest(distance: np.ndarray, count: int) -> np.ndarray:
    """Places of the `count` smallest distances (ties at the edge in the rows' order)."""
    if count <= 0 or not len(distance):
        return np.zeros(0, dtype=np.int64)
    if count >= len(distance):
        return np.arange(len(distance))
    # a histogram of the distances (0..bits) finds the cut; numpy's partition is slow on so many ties
    cut = int(np.searchsorted(np.cumsum(np.bincount(distance)), count))
    inside = np.flatnonzero(distance <= cut)
    return inside[np.argsort(distance[inside], kind="stable")[:count]]


def _signed_sums(query: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Each row's sum of the query's values, each signed by the row's bit (+ where the row's value is positive):
    a table of the 256 signed sums of every 8 dimensions, looked up by the row's bytes."""
    rows = np.ascontiguousarray(words.T).view(np.uint8)  # (rows, bytes), as the bits were packed
    width = rows.shape[1]
    padded = np.zeros(width * 8, dtype=np.float32)
    padded[:len(query)] = query
    signs = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little") * 2.0 - 1.0
    table = padded.reshape(-1, 8) @ signs.T.astype(np.float32)  # (bytes, 256)
    # the flat table read at byte * 256 + value: the same entries as table[byte, value], at half the cost
    return table.ravel()[rows + np.arange(width) * 256].sum(axis=1)


def hamming(bits: Bits, query: np.ndarray) -> np.ndarray:
    """Hamming distance from the query's sign bits to every row's (uint16, one a row)."""
    wanted = _words(_sign_bytes(np.asarray(query, dtype=np.float32)[None, :]))[0]
    distance = np.zeros(len(bits), dtype=np.uint16)
    scratch = np.empty(len(bits), dtype=np.uint64)
    for row, word in zip(bits.words, wanted):
        np.bitwise_xor(row, word, out=scratch)
        distance += np.bitwise_count(scratch)
    return distance


def _read_chunks(db: Database, name: str, dimension: int) -> Bits | None:
    """Ids and bits of every row in use, from the vec0 table's chunks (slots of int64 ids, a validity bitmap, the
    slots' bit vectors); None when the layout is not that."""
    width = dimension // 8
    if db.scalar("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?",
                 (f"{name}_vector_chunks00",)) is None:
        return None
    chunks = db.execute(f"SELECT c.chunk_id, c.validity, c.rowids, v.vectors FROM {name}_chunks c "
                        f"JOIN {name}_vector_chunks00 v ON v.rowid = c.chunk_id ORDER BY c.chunk_id").fetchall()
    return _from_chunks(chunks, width)


def _from_chunks(chunks: list, width: int) -> Bits | None:
    """Bits of the used slots of (chunk id, validity, rowids, vectors) rows, in their order."""
    if any(len(vectors) * 8 != len(rowids) * width or len(validity) * 64 != len(rowids)
           for _, validity, rowids, vectors in chunks):
        return None  # not the layout this reads: a bit a slot, 8-byte ids, `width` bytes of bits a slot
    if not chunks:
        return Bits(np.zeros(0, dtype=np.int64), np.zeros((_word_count(width), 0), dtype=np.uint64),
                    np.zeros((0, 3), dtype=np.int64))
    used = np.unpackbits(np.frombuffer(b"".join(c[1] for c in chunks), dtype=np.uint8), bitorder="little")
    used = used.astype(bool)
    ids = np.frombuffer(b"".join(c[2] for c in chunks), dtype=np.int64)[used]
    rows = np.frombuffer(b"".join(c[3] for c in chunks), dtype=np.uint8).reshape(-1, width)[used]
    slots = np.cumsum([0] + [len(c[1]) * 8 for c in chunks])
    counts = np.add.reduceat(used.astype(np.int64), slots[:-1])
    layout = np.stack([np.array([c[0] for c in chunks], dtype=np.int64),
                       np.cumsum(counts) - counts, counts.astype(np.int64)], axis=1)
    return Bits(ids, np.ascontiguousarray(_words(rows).T), layout)


def _reread(db: Database, name: str, dimension: int, old: Bits, touched: set[int]) -> Bits | None:
    """`old` with the `touched` chunks read again: the same arrays as reading every chunk (tests hold it so). None
    when `old` carries no layout or the chunks are not in the layout _read_chunks reads."""
    if old.chunks is None:
        return None
    wanted = sorted(touched)
    fresh: dict[int, Bits] = {}
    for start in range(0, len(wanted), 500):
        part = wanted[start:start + 500]
        for row in db.execute(f"SELECT c.chunk_id, c.validity, c.rowids, v.vectors FROM {name}_chunks c "
                              f"JOIN {name}_vector_chunks00 v ON v.rowid = c.chunk_id "
                              f"WHERE c.chunk_id IN ({','.join('?' * len(part))})", part).fetchall():
            one = _from_chunks([row], dimension // 8)
            if one is None:
                return None
            fresh[int(row[0])] = one
    chunks = old.chunks  # (chunk id, first row, rows), by chunk id
    ids: list[np.ndarray] = []
    words: list[np.ndarray] = []
    at = 0  # the old rows before `at` are placed
    for chunk in wanted:  # a few: the old rows between them are kept as they were, in one slice each
        place = int(np.searchsorted(chunks[:, 0], chunk))
        found = place < len(chunks) and chunks[place, 0] == chunk
        edge = int(chunks[place, 1]) if place < len(chunks) else len(old.ids)
        ids.append(old.ids[at:edge])
        words.append(old.words[:, at:edge])
        at = edge + int(chunks[place, 2]) if found else edge
        if chunk in fresh:  # else gone (sqlite-vec 0.1 keeps its chunks): its rows are left out
            ids.append(fresh[chunk].ids)
            words.append(fresh[chunk].words)
    ids.append(old.ids[at:])
    words.append(old.words[:, at:])
    layout = np.concatenate([chunks[~np.isin(chunks[:, 0], wanted), :], np.array(
        [(chunk, 0, len(fresh[chunk])) for chunk in wanted if chunk in fresh], dtype=np.int64).reshape(-1, 3)])
    layout = layout[np.argsort(layout[:, 0], kind="stable")]
    layout[:, 1] = np.cumsum(layout[:, 2]) - layout[:, 2]
    return Bits(np.concatenate(ids), np.ascontiguousarray(np.concatenate(words, axis=1)), layout)


def _sign_bytes(vectors: np.ndarray) -> np.ndarray:
    """As core.store.vectors.sign_bits packs them into sqlite-vec: a bit a dimension, 1 where positive."""
    return np.packbits(vectors > 0, axis=1, bitorder="little")


def _words(packed: np.ndarray) -> np.ndarray:
    """Rows of bytes as rows of 64-bit words (zero bytes added to a whole word: they never differ)."""
    width = packed.shape[1]
    padded = np.zeros((len(packed), _word_count(width) * 8), dtype=np.uint8)
    padded[:, :width] = packed
    return padded.view(np.uint64)


def _word_count(width: int) -> int:
    return -(-width // 8)


def _stamp_key(name: str) -> str:
    return f"{name}_bits_stamp"


def _touched_key(name: str) -> str:
    return f"{name}_bits_touched"
