"""The full scan of a large vector table's sign bits (core.store.vector_scan): as good as the exact search on rows
of mixed topics, where the clusters lose them, and right after every write, through any connection."""
from __future__ import annotations

import random

import numpy as np
import pytest

from core.store import vector_clusters as clusters
from core.store import vector_scan as scan
from core.store import vectors

NAME = "memory_vec"


@pytest.fixture(scope="module")
def mixed(embedder):
    """2,000 rows of two or three topics each (the normalised mean of real sentence vectors, as a turn of a
    conversation mixes what it says), and 10 questions about one topic."""
    from bench.synthetic import queries, sentences
    said = embedder.embed(sentences(40, seed=11))
    rng = random.Random(5)
    picks = sorted({tuple(sorted(rng.sample(range(40), rng.choice((2, 3))))) for _ in range(6000)})[:2000]
    rows = np.stack([said[list(p)].sum(axis=0) for p in picks])
    return rows / np.linalg.norm(rows, axis=1, keepdims=True), embedder.embed(queries(10, seed=12))


def _overlap(db, questions: np.ndarray, k: int = 10) -> float:
    found = [{i for i, _ in vectors.knn(db, "memory", q, k)} for q in questions]
    exact = [{i for i, _ in vectors.knn(db, "memory", q, k, exact=True)} for q in questions]
    return float(np.mean([len(f & e) / k for f, e in zip(found, exact)]))


def _store(db, embedder, matrix: np.ndarray):
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, len(matrix) + 1)), matrix)
    return db


def test_a_table_past_its_shards_answers_as_the_exact_search_on_rows_of_mixed_topics(db, embedder, mixed,
                                                                                      monkeypatch):
    matrix, questions = mixed
    monkeypatch.setattr(vectors, "SHARD_PACKS_UP_TO", 500)  # 2,000 rows: every row's bits scanned
    _store(db, embedder, matrix)
    assert vectors._scans_every_row(db, NAME)
    # word-list sentences shared by many rows make near-ties in the top 10; on real text (bench/recall.py) 0.99
    assert _overlap(db, questions) >= 0.95


def test_a_finely_clustered_table_scans_every_row_and_a_coarse_one_its_packs(db, embedder, mixed, monkeypatch):
    matrix, _ = mixed
    monkeypatch.setattr(clusters, "MIN_SCANNED", 250)  # an eighth of the rows, as 1,000 of 8,000
    _store(db, embedder, matrix)
    clusters.cluster(db, NAME, vectors.sign_bits, clusters=8)  # a query probes all 8: the packs serve it whole
    assert not vectors._scans_every_row(db, NAME)
    clusters.cluster(db, NAME, vectors.sign_bits)  # 512 clusters of ~4: 64 probes, an eighth of them
    assert vectors._scans_every_row(db, NAME)


def test_the_bits_read_from_sqlite_vec_are_the_stored_vectors_signs_after_updates_and_deletes(db, embedder, mixed):
    matrix, _ = mixed
    _store(db, embedder, matrix[:500])
    vectors.upsert_vectors(db, "memory", [7, 8], matrix[[100, 101]])  # moved: new slots, the old ones freed
    vectors.delete_vectors(db, "memory", [9, 400])
    bits = scan.table_bits(db, NAME, 384)
    assert bits is not None
    order = np.argsort(bits.ids)
    expected = {i: matrix[i - 1] for i in range(1, 501) if i not in (9, 400)} | {7: matrix[100], 8: matrix[101]}
    assert bits.ids[order].tolist() == sorted(expected)
    stored = np.ascontiguousarray(bits.words.T).view(np.uint8)[order]
    assert np.array_equal(stored, vectors.sign_bits(np.stack([expected[i] for i in sorted(expected)])))


def test_a_write_or_a_wipe_through_another_connection_is_seen_by_the_next_query(db, embedder, mixed, monkeypatch):
    from core.store.db import open_db
    from core.store.wipe import _wipe_vectors
    matrix, _ = mixed
    monkeypatch.setattr(vectors, "SHARD_PACKS_UP_TO", 100)  # 500 rows: the full scan, its bits kept on `db`
    _store(db, embedder, matrix[:500])
    bee = embedder.embed(["I keep bees on the roof of my flat"])
    assert vectors.knn(db, "memory", bee[0], 1)[0][0] != 9000
    other = open_db(db.path)
    try:
        vectors.upsert_vectors(other, "memory", [9000], bee)
        assert vectors.knn(db, "memory", embedder.embed(["beekeeping at home"])[0], 1)[0][0] == 9000
        vectors.delete_vectors(other, "memory", [9000])
        assert 9000 not in {i for i, _ in vectors.knn(db, "memory", bee[0], 10)}
        with other.transaction():
            _wipe_vectors(other)
    finally:
        other.close()
    assert vectors.knn(db, "memory", bee[0], 10) == []


def test_rows_the_caller_refuses_are_passed_over_before_the_k_are_chosen(db, embedder, mixed, monkeypatch):
    matrix, questions = mixed
    monkeypatch.setattr(vectors, "SHARD_PACKS_UP_TO", 100)
    _store(db, embedder, matrix[:1000])
    exact = [i for i, _ in vectors.knn(db, "memory", questions[0], 15, exact=True)]
    refused = set(exact[:5])
    found = vectors.knn(db, "memory", questions[0], 10, keep=lambda ids: set(ids) - refused)
    assert [i for i, _ in found] == exact[5:15]


def test_the_hamming_shortlist_keeps_the_nearest_and_ranks_them_by_the_query_s_floats():
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(3000, 384)).astype(np.float32)
    bits = scan.Bits(np.arange(10, 3010), np.ascontiguousarray(scan._words(vectors.sign_bits(rows)).T))
    query = rows[42] + 0.1 * rng.normal(size=384).astype(np.float32)
    assert scan.nearest(bits, query, 50, 5)[0] == 52  # ids, not places
    distance = scan.hamming(bits, query)
    expected = np.array([np.unpackbits(b).sum() for b in vectors.sign_bits(rows) ^ vectors.sign_bits(query[None])])
    assert np.array_equal(distance, expected)
    shortlist = scan._hamming_nearest(distance, 100)
    assert len(shortlist) == 100 and distance[shortlist].max() <= np.sort(distance)[99]
    assert len(scan.nearest(bits, query, 5000, 5000)) == 3000  # asked for more than there are


def test_the_plan_grows_slowly_with_the_table_and_never_passes_on_more_rows_than_there_are():
    assert scan.plan(100_000, 10) == (1500, 300)
    assert scan.plan(1_000_000, 10) == (2995, 599)
    assert scan.plan(20_000, 10) == (1500, 300)
    assert scan.plan(300, 10) == (300, 300)
    assert scan.plan(100_000, 100) == (4000, 800)  # a deep query rescores 8k at least


def test_the_signed_sums_are_the_query_s_values_signed_by_each_row_s_bits():
    rng = np.random.default_rng(2)
    rows = rng.normal(size=(700, 384)).astype(np.float32)
    query = rng.normal(size=384).astype(np.float32)
    words = np.ascontiguousarray(scan._words(vectors.sign_bits(rows)).T)
    sums = scan._signed_sums(query, words)
    assert np.allclose(sums, np.where(rows > 0, query, -query).sum(axis=1), atol=1e-3)
    # the same float32 sums, bit for bit, as the table indexed [byte, value] (how it was read before)
    packed = np.ascontiguousarray(words.T).view(np.uint8)
    signs = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little") * 2.0 - 1.0
    table = query.reshape(-1, 8) @ signs.T.astype(np.float32)
    assert np.array_equal(sums, table[np.arange(packed.shape[1]), packed].sum(axis=1))
