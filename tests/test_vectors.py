"""The vector store: a real vec0 bit-vector prefilter with exact float rescoring, on real MiniLM embeddings."""
from __future__ import annotations

import numpy as np
import pytest

from core.errors import EmbedderMismatch, InvalidInput
from core.store import vector_clusters as clusters
from core.store import vectors

SENTENCES = ["My sister lives in Lisbon", "I am allergic to peanuts", "The car needs new tyres",
             "I play the cello on Sundays", "Our dog Rex hates thunderstorms", "I booked a flight to Tokyo"]


@pytest.fixture
def bound(db, embedder):
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, len(SENTENCES) + 1)), embedder.embed(SENTENCES))
    return db


def test_real_vec0_hamming_knn_on_sign_bits(bound, embedder):
    query = vectors.sign_bits(embedder.embed(["which food makes me ill?"]))[0].tobytes()
    rows = bound.execute("SELECT id, distance FROM memory_vec WHERE bits MATCH vec_bit(?) AND k = 6 "
                         "ORDER BY distance", (query,)).fetchall()
    assert len(rows) == len(SENTENCES) and rows[0][1] <= rows[-1][1]  # Hamming distances, every shard
    assert vectors.knn(bound, "memory", embedder.embed(["which food makes me ill?"])[0], 1)[0][0] == 2


def test_knn_matches_exact_cosine_and_orders_nearest_first(bound, embedder):
    query = embedder.embed(["musical instrument practice"])[0]
    fast = vectors.knn(bound, "memory", query, 3)
    exact = vectors.knn(bound, "memory", query, 3, exact=True)
    assert [i for i, _ in fast] == [i for i, _ in exact] and fast[0][0] == 4
    assert fast[0][1] == pytest.approx(1 - float(embedder.embed(SENTENCES[3:4])[0] @ query), abs=1e-5)


@pytest.fixture(scope="module")
def synthetic(embedder):
    """2,000 memory sentences and 30 questions, embedded once for the module."""
    from bench.synthetic import queries, sentences
    return embedder.embed(sentences(2000)), embedder.embed(queries(30))


def _recall_against_exact(db, matrix: np.ndarray, questions: np.ndarray) -> float:
    overlaps = []
    for query in questions:
        exact = {i + 1 for i in np.argsort(-(matrix @ query))[:10]}
        overlaps.append(len(exact & {i for i, _ in vectors.knn(db, "memory", query, 10)}) / 10)
    return float(np.mean(overlaps))


def test_prefilter_keeps_recall_against_exact_search_on_real_sentences(db, embedder, synthetic):
    matrix, questions = synthetic
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, len(matrix) + 1)), matrix)
    assert _recall_against_exact(db, matrix, questions) >= 0.98


def test_a_clustered_table_scans_only_the_nearest_clusters_and_keeps_recall(db, embedder, synthetic):
    matrix, questions = synthetic
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, len(matrix) + 1)), matrix)
    assert clusters.cluster(db, "memory_vec", vectors.sign_bits, clusters=64) == 64
    partitions = {p for (p,) in db.execute("SELECT DISTINCT shard FROM memory_vec")}
    assert min(partitions) >= clusters.CLUSTER_BASE and len(partitions) > 32  # every row moved to a cluster
    assert _recall_against_exact(db, matrix, questions) >= 0.95  # 8 of 64 clusters: ~1/8 of the rows scanned


def test_a_table_is_clustered_once_it_grows_and_new_rows_join_their_nearest_cluster(db, embedder, synthetic,
                                                                                   monkeypatch):
    matrix, _ = synthetic
    monkeypatch.setattr(clusters, "CLUSTER_AT", 300)
    monkeypatch.setattr(clusters, "CLUSTERS", 16)
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, 251)), matrix[:250])
    assert clusters.centroids(db, "memory_vec") is None
    vectors.upsert_vectors(db, "memory", list(range(251, 401)), matrix[250:400])
    centres = clusters.centroids(db, "memory_vec")
    assert centres is not None and centres.shape == (16, embedder.dimension)
    fresh = embedder.embed(["My grandmother taught me to bake baklava in Izmir"])
    vectors.upsert_vectors(db, "memory", [5000], fresh)
    expected = int(clusters.nearest_clusters(centres, fresh)[0])
    assert db.scalar("SELECT shard FROM memory_vec WHERE id = 5000") == expected
    assert vectors.knn(db, "memory", embedder.embed(["baking baklava with grandma"])[0], 1)[0][0] == 5000
    vectors.delete_vectors(db, "memory", [5000])
    assert 5000 not in [i for i, _ in vectors.knn(db, "memory", fresh[0], 5)]
    vectors.reembed(db, embedder.name, embedder.dimension, lambda table: [], embedder.embed)
    assert clusters.centroids(db, "memory_vec") is None  # a re-embed learns new clusters when it grows again


def test_centroids_are_kept_on_the_connection_until_another_one_reclusters(db, embedder, synthetic):
    from core.store.db import open_db
    matrix, _ = synthetic
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, 401)), matrix[:400])
    clusters.cluster(db, "memory_vec", vectors.sign_bits, clusters=16)
    first = clusters.centroids(db, "memory_vec")
    assert clusters.centroids(db, "memory_vec") is first  # read once, then kept
    other = open_db(db.path)
    try:
        clusters.cluster(other, "memory_vec", vectors.sign_bits, clusters=8, seed=1)
    finally:
        other.close()
    assert clusters.centroids(db, "memory_vec").shape == (8, embedder.dimension)  # the new stamp is seen


def test_upsert_replaces_and_delete_removes_both_copies(bound, embedder):
    vectors.upsert_vectors(bound, "memory", [2], embedder.embed(["I love jazz piano"]))
    assert vectors.knn(bound, "memory", embedder.embed(["jazz"])[0], 1)[0][0] == 2
    vectors.delete_vectors(bound, "memory", [2])
    assert vectors.get_vectors(bound, "memory", [2]) == {}
    assert bound.scalar("SELECT count(*) FROM memory_vec WHERE id = 2") == 0
    assert 2 not in [i for i, _ in vectors.knn(bound, "memory", embedder.embed(["peanuts"])[0], 6)]


def test_bad_vectors_and_dimensions_are_refused(db, bound):
    with pytest.raises(EmbedderMismatch):
        vectors.upsert_vectors(bound, "memory", [1], np.ones(16, dtype=np.float32))
    with pytest.raises(InvalidInput):
        vectors.upsert_vectors(bound, "memory", [1, 2], np.ones(383, dtype=np.float32))
    with pytest.raises(InvalidInput):
        vectors.upsert_vectors(bound, "memory", [1], np.full(384, np.nan, dtype=np.float32))
    with pytest.raises(InvalidInput):
        vectors.knn(bound, "facts", np.ones(384, dtype=np.float32), 1)


def test_a_store_bound_before_the_bit_layout_still_searches_its_float_vectors(db, embedder):
    with db.transaction():  # the layout of stores made before the prefilter: one float vec0 table each
        db.execute("INSERT INTO meta(key, value) VALUES ('embedder_name', ?), ('embedder_dimension', ?)",
                   (embedder.name, str(embedder.dimension)))
        for table in ("memory_vec", "episode_vec"):
            db.execute(f"CREATE VIRTUAL TABLE {table} USING vec0(id INTEGER PRIMARY KEY, "
                       f"embedding float[{embedder.dimension}] distance_metric=cosine)")
    vectors.upsert_vectors(db, "memory", [1, 2], embedder.embed(SENTENCES[:2]))
    assert vectors.knn(db, "memory", embedder.embed(["peanut butter"])[0], 1)[0][0] == 2
    assert set(vectors.get_vectors(db, "memory", [1, 2])) == {1, 2}


def test_the_scan_plan_grows_with_the_clusters():
    """Small clusters: 12 probes of 160 rows; a million rows in 512 clusters: 16 probes of a tenth of each; a table
    clustered young (8,000 rows, clusters of ~16): enough probes to score MIN_SCANNED rows."""
    from core.store import vector_clusters as clusters
    assert clusters.probe_plan(512, 8_000) == (64, 160)
    assert clusters.probe_plan(512, 20_000) == (26, 160)
    assert clusters.probe_plan(512, 100_000) == (12, 160)
    assert clusters.probe_plan(512, 1_000_000) == (16, 195)
    assert clusters.probe_plan(512, 100_000_000) == (16, clusters.PER_PROBE_MAX)
    assert clusters.probe_plan(0, 0) == (12, 160)
