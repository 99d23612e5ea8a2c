"""Packed partitions (core.store.vector_packs): the same answers as an exact search, kept right by every write."""
from __future__ import annotations

import numpy as np
import pytest

from core.store import vector_clusters as clusters
from core.store import vector_packs as packs
from core.store import vectors
from core.store.vector_schema import partition_members, partitions_of

NAME = "memory_vec"


@pytest.fixture(scope="module")
def synthetic(embedder):
    from bench.synthetic import queries, sentences
    return embedder.embed(sentences(1200)), embedder.embed(queries(30))


@pytest.fixture
def clustered(db, embedder, synthetic):
    """1,200 real sentence vectors in 16 clusters, every cluster packed."""
    matrix, _ = synthetic
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, len(matrix) + 1)), matrix)
    clusters.cluster(db, NAME, vectors.sign_bits, clusters=16)
    return db


def _packed(db) -> dict[int, set[int]]:
    return {int(p): set(np.frombuffer(ids, dtype=np.int64).tolist())
            for p, ids in db.execute(f"SELECT partition, ids FROM {NAME}_packs")}


def _same_as_exact(db, questions: np.ndarray, k: int = 10) -> None:
    for query in questions:
        fast = vectors.knn(db, "memory", query, k)
        exact = vectors.knn(db, "memory", query, k, exact=True)
        assert [i for i, _ in fast] == [i for i, _ in exact]
        assert [d for _, d in fast] == pytest.approx([d for _, d in exact], abs=1e-6)  # rescored on the floats


def test_int8_codes_rank_rows_by_cosine_whatever_their_length():
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(500, 384)).astype(np.float32) * rng.uniform(0.1, 50, size=(500, 1)).astype(np.float32)
    query = rng.normal(size=384).astype(np.float32)
    codes, scales = packs.encode(rows)
    ids, approx = packs.similarities([packs.Pack(np.arange(500), codes, scales)], query / np.linalg.norm(query))
    cosine = rows @ query / np.linalg.norm(rows, axis=1) / np.linalg.norm(query)
    assert np.abs(approx - cosine).max() < 2e-3 and list(ids) == list(range(500))
    assert packs.encode(np.zeros((1, 384), dtype=np.float32))[0].max() == 0  # a zero row stays zero, no NaN


def test_a_clustered_table_is_packed_and_answers_as_the_exact_search(clustered, synthetic):
    _, questions = synthetic
    members = {p: set(partition_members(clustered.conn, NAME, p)) for p in _packed(clustered)}
    assert _packed(clustered) == members and sum(map(len, members.values())) == 1200  # every row, once
    _same_as_exact(clustered, questions)


def test_the_shadow_tables_name_the_partition_vec0_itself_reports(clustered):
    ids = [1, 77, 600, 1200]
    assert partitions_of(clustered.conn, NAME, ids) == {
        i: clustered.scalar(f"SELECT shard FROM {NAME} WHERE id = ?", (i,)) for i in ids}


def test_a_small_write_updates_its_packs_in_place(clustered, embedder, synthetic):
    _, questions = synthetic
    fresh = embedder.embed(["My grandmother taught me to bake baklava in Izmir"])
    vectors.upsert_vectors(clustered, "memory", [5000], fresh)
    home = partitions_of(clustered.conn, NAME, [5000])[5000]
    assert 5000 in _packed(clustered)[home]
    assert vectors.knn(clustered, "memory", embedder.embed(["baking baklava with grandma"])[0], 1)[0][0] == 5000
    moved = embedder.embed(["The car needs new tyres before winter"])  # the same id, somewhere else
    vectors.upsert_vectors(clustered, "memory", [5000], moved)
    assert sum(5000 in ids for ids in _packed(clustered).values()) == 1
    vectors.delete_vectors(clustered, "memory", [5000, 3])
    assert not any({5000, 3} & ids for ids in _packed(clustered).values())
    _same_as_exact(clustered, questions)


def test_a_bulk_write_drops_the_packs_it_touched_and_answers_stay_exact_until_they_are_built(
        clustered, synthetic, monkeypatch):
    matrix, questions = synthetic
    monkeypatch.setattr(packs, "UPDATE_BUDGET", 1)
    vectors.upsert_vectors(clustered, "memory", list(range(2001, 2201)), matrix[:200][::-1])
    assert len(_packed(clustered)) < 16  # some partitions unpacked, scanned by sqlite-vec meanwhile
    _same_as_exact(clustered, questions)
    assert vectors.pack_partitions(clustered) > 0
    assert sum(map(len, _packed(clustered).values())) == 1400
    _same_as_exact(clustered, questions)


def test_a_write_by_another_process_keeps_this_ones_answers_right(clustered, embedder):
    from core.store.db import open_db
    other = open_db(clustered.path)
    try:
        vectors.upsert_vectors(other, "memory", [7000], embedder.embed(["I keep bees on the roof of my flat"]))
    finally:
        other.close()
    assert vectors.knn(clustered, "memory", embedder.embed(["beekeeping at home"])[0], 1)[0][0] == 7000


def test_small_tables_are_packed_by_the_idle_upkeep_and_rebuilt_by_doctor(db, embedder, synthetic):
    matrix, questions = synthetic
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, 301)), matrix[:300])
    assert not packs.read(db, NAME, range(vectors.SHARDS), 384)  # shards: nothing packed until the upkeep runs
    assert vectors.pack_partitions(db) == vectors.SHARDS
    assert sum(map(len, _packed(db).values())) == 300
    _same_as_exact(db, questions)
    db.execute(f"UPDATE {NAME}_packs SET ids = ?", (b"",))  # a damaged pack: doctor --rebuild makes it again
    assert vectors.repack(db) == vectors.Upkeep(clustered=0, packed=vectors.SHARDS)
    assert sum(map(len, _packed(db).values())) == 300


def test_a_table_past_its_shards_is_clustered_by_the_upkeep_not_by_the_write(db, embedder, synthetic, monkeypatch):
    """Past SHARD_PACKS_UP_TO rows a write leaves the table to the upkeep (no stall of seconds inside a user's
    write); the upkeep clusters and packs it, and a query then probes enough small clusters to stay exact."""
    matrix, questions = synthetic
    monkeypatch.setattr(vectors, "SHARD_PACKS_UP_TO", 500)
    monkeypatch.setattr(clusters, "MIN_SCANNED", 150)  # an eighth of the rows, as 1,000 of 8,000
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, 1201)), matrix[:1200])
    assert clusters.centroids(db, NAME) is None and not packs.read(db, NAME, range(vectors.SHARDS), 384)
    assert vectors.upkeep(db) == vectors.Upkeep(clustered=1, packed=0)  # clustering packed every cluster
    assert len(clusters.centroids(db, NAME)) == clusters.CLUSTERS
    assert sum(map(len, _packed(db).values())) == 1200
    assert clusters.probe_plan(clusters.CLUSTERS, 1200)[0] == 64  # 150 rows in clusters of ~2.3
    found = [{i for i, _ in vectors.knn(db, "memory", q, 10)} for q in questions]
    exact = [{i for i, _ in vectors.knn(db, "memory", q, 10, exact=True)} for q in questions]
    assert np.mean([len(f & e) / 10 for f, e in zip(found, exact)]) >= 0.95
    assert vectors.upkeep(db) == vectors.Upkeep(clustered=0, packed=0)  # nothing left to do


def test_reembed_and_a_wipe_leave_no_pack_of_old_vectors(clustered, embedder):
    vectors.reembed(clustered, embedder.name, embedder.dimension,
                    lambda table: [(1, "I play the cello")] if table == "memory" else [], embedder.embed)
    assert {i for ids in _packed(clustered).values() for i in ids} == {1}
    clusters.drop(clustered, NAME)
    assert packs.read(clustered, NAME, range(vectors.SHARDS), 384) == {}


def test_an_import_leaves_every_partition_it_filled_packed(db, embedder, tmp_path):
    from core.memory.manage import MemoryManager
    source = MemoryManager(db, embedder)
    for text in ("My sister Ana lives in Porto", "I am allergic to peanuts", "I play the cello on Sundays"):
        source.add(text)
    source.export_to(tmp_path / "export.json")
    from core.store.db import open_db
    other = open_db(tmp_path / "other" / "engram.db")
    try:
        MemoryManager(other, embedder).import_from(tmp_path / "export.json")
        assert sum(len(p) for p in packs.read(other, NAME, range(vectors.SHARDS), 384).values()) == 3
        assert vectors.knn(other, "memory", embedder.embed(["nut allergy"])[0], 1)[0][0] == 2
    finally:
        other.close()


def test_the_daily_forgetting_job_packs_what_bulk_writes_left_unpacked(clustered, embedder, monkeypatch):
    from types import SimpleNamespace

    from app.services.scheduling import forgetting_handler
    from core.config import Settings
    from core.scheduler import Environment, JobSpec, Scheduler
    monkeypatch.setattr(packs, "UPDATE_BUDGET", 1)
    vectors.upsert_vectors(clustered, "memory", [9001, 9002], embedder.embed(["I cycle to work", "I bake bread"]))
    unpacked = 16 - len(_packed(clustered))
    assert unpacked > 0
    handler = forgetting_handler(SimpleNamespace(settings=Settings(), embedder=embedder), clustered)
    idle = Environment(clock=clustered.clock, idle_seconds=lambda: 1e9, on_ac_power=lambda: True)
    scheduler = Scheduler(clustered, [JobSpec("forgetting", handler)], env=idle)
    job = scheduler.run_job(scheduler.enqueue("forgetting").id)
    assert job.state == "done", job.message
    assert len(_packed(clustered)) == 16 and {9001, 9002} <= {i for ids in _packed(clustered).values() for i in ids}


def test_an_unclustered_table_past_the_shard_limit_keeps_no_packs(db, embedder, synthetic, monkeypatch):
    matrix, questions = synthetic
    monkeypatch.setattr(vectors, "SHARD_PACKS_UP_TO", 400)
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, 301)), matrix[:300])
    vectors.pack_partitions(db)
    vectors.upsert_vectors(db, "memory", list(range(301, 501)), matrix[300:500])
    assert not packs._has_table(db, NAME)  # scoring 500 rows would be slower than the bit scan: not kept up
    assert vectors.pack_partitions(db) == 0
    _same_as_exact(db, questions)


def test_a_damaged_pack_is_bit_scanned_instead_and_rebuilt_by_the_next_write(clustered, embedder, synthetic):
    _, questions = synthetic
    victim = next(iter(_packed(clustered)))
    clustered.execute(f"UPDATE {NAME}_packs SET codes = x'00' WHERE partition = ?", (victim,))
    _same_as_exact(clustered, questions)  # its partition answers through sqlite-vec's bit scan
    member = sorted(partition_members(clustered.conn, NAME, victim))[0]
    vectors.upsert_vectors(clustered, "memory", [member], vectors.get_vectors(clustered, "memory", [member])[member])
    assert victim not in _packed(clustered)  # dropped by the write, not rewritten from damage
    assert vectors.pack_partitions(clustered) == 1 and victim in _packed(clustered)
    _same_as_exact(clustered, questions)


def test_packs_dropped_by_another_process_mid_query_leave_the_bit_scan(clustered, embedder, synthetic, monkeypatch):
    _, questions = synthetic
    clusters.drop(clustered, NAME)  # as a re-embed elsewhere would, between this query's check and its read
    clusters.cluster(clustered, NAME, vectors.sign_bits, clusters=16)
    packs.drop(clustered, NAME)
    monkeypatch.setattr(packs, "_has_table", lambda db, name: True)
    assert packs.read(clustered, NAME, [1000, 1001], 384) == {}
    _same_as_exact(clustered, questions)


def test_rows_the_caller_refuses_are_passed_over_before_rescoring(clustered, synthetic, monkeypatch):
    """knn(keep=...): recall's way past archived rows. From packs, the answer is the exact top k of the kept rows,
    and only kept rows are rescored on their floats."""
    _, questions = synthetic
    refused = {i for q in questions[:5] for i, _ in vectors.knn(clustered, "memory", q, 10, exact=True)}
    rescored: list[int] = []
    real = vectors._cosine_distances
    monkeypatch.setattr(vectors, "_cosine_distances", lambda db, source, v, ids: rescored.extend(ids)
                        or real(db, source, v, ids))
    for query in questions[:5]:
        fast = vectors.knn(clustered, "memory", query, 10, keep=lambda ids: set(ids) - refused)
        exact = [(i, d) for i, d in vectors.knn(clustered, "memory", query, 200, exact=True) if i not in refused]
        assert [i for i, _ in fast] == [i for i, _ in exact[:10]]
    assert rescored and not refused & set(rescored)


def test_a_few_refused_rows_among_the_best_cost_no_second_round_of_questions(clustered, synthetic):
    """The rows turns already in the prompt: refused, but fewer than the extra rows rescored beyond k, so keep is
    asked once; the answer is still the top k of the kept rows."""
    _, questions = synthetic
    query = questions[7]
    refused = {i for i, _ in vectors.knn(clustered, "memory", query, 5, exact=True)}
    asked: list[int] = []

    def keep(ids: list[int]) -> set[int]:
        asked.append(len(ids))
        return set(ids) - refused

    fast = vectors.knn(clustered, "memory", query, 10, keep=keep)
    exact = [i for i, _ in vectors.knn(clustered, "memory", query, 200, exact=True) if i not in refused]
    assert [i for i, _ in fast] == exact[:10] and asked == [10 + vectors.PACKED_RESCORED_EXTRA]


def test_the_daily_forgetting_job_clusters_a_table_grown_past_its_shards(db, embedder, synthetic, monkeypatch):
    from types import SimpleNamespace

    from app.services.scheduling import forgetting_handler
    from core.config import Settings
    from core.scheduler import Environment, JobSpec, Scheduler
    matrix, questions = synthetic
    monkeypatch.setattr(vectors, "SHARD_PACKS_UP_TO", 500)
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, 1201)), matrix[:1200])
    handler = forgetting_handler(SimpleNamespace(settings=Settings(), embedder=embedder), db)
    idle = Environment(clock=db.clock, idle_seconds=lambda: 1e9, on_ac_power=lambda: True)
    scheduler = Scheduler(db, [JobSpec("forgetting", handler)], env=idle)
    assert scheduler.run_job(scheduler.enqueue("forgetting").id).state == "done"
    assert clusters.centroids(db, NAME) is not None and sum(map(len, _packed(db).values())) == 1200


def test_a_row_another_process_writes_while_the_clusters_are_learnt_joins_one(db, embedder, synthetic, monkeypatch):
    """The centroids are learnt outside the write lock; the rows are read again under it, so a row written in
    between is moved into a cluster like the rest (left in its shard, no clustered query would ever probe it)."""
    from core.store.db import open_db
    matrix, _ = synthetic
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", list(range(1, 601)), matrix[:600])
    real = clusters.kmeans

    def learnt_while_another_writes(*args, **kwargs):
        other = open_db(db.path)
        try:
            vectors.upsert_vectors(other, "memory", [7000], embedder.embed(["I keep bees on the roof of my flat"]))
        finally:
            other.close()
        return real(*args, **kwargs)

    monkeypatch.setattr(clusters, "kmeans", learnt_while_another_writes)
    clusters.cluster(db, NAME, vectors.sign_bits, clusters=16)
    assert vectors.knn(db, "memory", embedder.embed(["beekeeping at home"])[0], 1)[0][0] == 7000
    assert 7000 in {i for ids in _packed(db).values() for i in ids}
