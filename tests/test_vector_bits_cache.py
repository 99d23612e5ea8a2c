"""A connection's cached sign bits (core.store.vector_scan.table_bits) after its own writes: only the vec0 chunks the
writes touched are read again, and the bits are the same arrays, in the same order, as reading every chunk; a write
by another connection, a rolled-back one or one that does not say what it touched has every chunk read again."""
from __future__ import annotations

import numpy as np
import pytest

from core.store import vector_scan as scan
from core.store import vectors

NAME = "memory_vec"


@pytest.fixture
def rows():
    return np.random.default_rng(3).normal(size=(3000, 384)).astype(np.float32)


@pytest.fixture
def full_reads(monkeypatch) -> list[str]:
    read: list[str] = []
    real = scan._read_chunks

    def counted(db, name, dimension):
        read.append(name)
        return real(db, name, dimension)

    monkeypatch.setattr(scan, "_read_chunks", counted)
    return read


def _same_as_every_chunk(db) -> None:
    cached = scan.table_bits(db, NAME, 384)
    fresh = scan._from_chunks(db.execute(
        f"SELECT c.chunk_id, c.validity, c.rowids, v.vectors FROM {NAME}_chunks c "
        f"JOIN {NAME}_vector_chunks00 v ON v.rowid = c.chunk_id ORDER BY c.chunk_id").fetchall(), 48)
    assert cached is not None and fresh is not None
    assert np.array_equal(cached.ids, fresh.ids)
    assert np.array_equal(cached.words, fresh.words) and cached.words.flags.c_contiguous
    assert np.array_equal(cached.chunks, fresh.chunks)


def _stored(db, rows: np.ndarray):
    vectors.bind_embedder(db, "random-384", 384)
    vectors.upsert_vectors(db, "memory", list(range(1, len(rows) + 1)), rows)
    assert scan.table_bits(db, NAME, 384) is not None
    return db


def test_this_connection_s_writes_reread_only_their_chunks_and_give_the_same_bits(db, rows, full_reads):
    _stored(db, rows[:2500])
    full_reads.clear()
    vectors.upsert_vectors(db, "memory", list(range(2501, 2601)), rows[2500:2600])  # new rows
    vectors.upsert_vectors(db, "memory", [5, 17, 900], rows[[2700, 2701, 2702]])  # moved to new slots
    vectors.delete_vectors(db, "memory", [100, 2000, 2550])
    _same_as_every_chunk(db)
    assert full_reads == []
    vectors.upsert_vectors(db, "memory", [4000], rows[[2800]])  # and once more after a query
    _same_as_every_chunk(db)
    chunks = len(scan.table_bits(db, NAME, 384).chunks)
    vectors.upsert_vectors(db, "memory", list(range(5001, 6701)), rows[:1700])  # fills chunks: new ones begin
    _same_as_every_chunk(db)
    assert len(scan.table_bits(db, NAME, 384).chunks) > chunks
    vectors.delete_vectors(db, "memory", list(range(5001, 6701)))
    _same_as_every_chunk(db)
    assert full_reads == []
    bits = scan.table_bits(db, NAME, 384)
    assert 4000 in bits.ids and 100 not in bits.ids and len(bits) == 2500 + 100 - 3 + 1


def test_a_rolled_back_write_leaves_the_bits_as_the_file_has_them(db, rows, full_reads):
    _stored(db, rows[:1000])
    before = scan.table_bits(db, NAME, 384)
    with pytest.raises(RuntimeError), db.transaction():
        vectors.upsert_vectors(db, "memory", [5000], rows[[1500]])
        raise RuntimeError("the turn failed")
    assert scan.table_bits(db, NAME, 384) is before
    vectors.upsert_vectors(db, "memory", [5001], rows[[1501]])
    _same_as_every_chunk(db)
    assert 5000 not in scan.table_bits(db, NAME, 384).ids


def test_another_connection_s_write_or_a_wipe_reads_every_chunk_again(db, rows, full_reads):
    from core.store.db import open_db
    _stored(db, rows[:1000])
    full_reads.clear()
    other = open_db(db.path)
    try:
        vectors.upsert_vectors(other, "memory", [7000], rows[[1200]])
    finally:
        other.close()
    vectors.upsert_vectors(db, "memory", [7001], rows[[1201]])  # this one's own write does not hide it
    bits = scan.table_bits(db, NAME, 384)
    assert {7000, 7001} <= set(bits.ids.tolist()) and full_reads == [NAME]
    with db.transaction():
        scan.changed(db, NAME)  # a write that does not say which chunks it touched (a wipe, a re-embed)
    scan.table_bits(db, NAME, 384)
    assert full_reads == [NAME, NAME]
