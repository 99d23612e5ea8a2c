"""The one-file store: pragmas, sqlite-vec, migrations, backups, privacy, and files it must refuse."""
from __future__ import annotations

import hashlib
import os
import stat

import numpy as np
import pytest

from core.errors import NotADatabase, SchemaTooNew
from core.store import vectors
from core.store.db import backup, open_db
from core.store.migrations import LATEST_VERSION, MIGRATIONS, Migration


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_open_sets_wal_foreign_keys_secure_delete_and_busy_timeout(db):
    assert db.scalar("PRAGMA journal_mode") == "wal"
    assert db.scalar("PRAGMA foreign_keys") == 1
    assert db.scalar("PRAGMA secure_delete") == 1
    assert db.scalar("PRAGMA busy_timeout") >= 1000
    assert db.scalar("SELECT vec_version()").startswith("v0.1")
    assert db.scalar("SELECT count(*) FROM pragma_compile_options WHERE compile_options = 'ENABLE_FTS5'") == 1


def test_every_migration_is_recorded_in_the_file(db):
    rows = db.query("SELECT version, name FROM schema_migrations ORDER BY version")
    assert [(r["version"], r["name"]) for r in rows] == [(m.version, m.name) for m in MIGRATIONS]
    assert db.schema_version() == LATEST_VERSION


def test_fts5_secure_delete_is_on(db):
    for table in ("memories_fts", "episodes_fts"):
        assert db.scalar(f"SELECT v FROM {table}_config WHERE k = 'secure-delete'") == 1


def test_real_vec0_knn_query_finds_the_nearest_sentence(db, embedder):
    sentences = ["My sister lives in Lisbon", "I am allergic to peanuts", "The car needs new tyres",
                 "I play the cello on Sundays"]
    vectors.bind_embedder(db, embedder.name, embedder.dimension)
    vectors.upsert_vectors(db, "memory", [1, 2, 3, 4], embedder.embed(sentences))
    hits = db.execute("SELECT id, distance FROM memory_vec WHERE bits MATCH vec_bit(?) AND k = 2 ORDER BY distance",
                      (vectors.sign_bits(embedder.embed(["which food makes me ill?"]))[0].tobytes(),)).fetchall()
    assert hits[0][0] == 2 and hits[0][1] < hits[1][1]
    assert vectors.knn(db, "memory", embedder.embed(["musical instrument"])[0], 1)[0][0] == 4


def test_vector_partitions_are_indexed_in_new_stores_and_by_migration_in_older_ones(tmp_path, clock, embedder):
    def partition_indexes(database):
        return {r[0] for r in database.execute("SELECT name FROM sqlite_schema WHERE type = 'index' "
                                               "AND name LIKE '%vec_chunks_partition'")}

    path = tmp_path / "engram.db"
    older = open_db(path, clock=clock, migrations=MIGRATIONS[:3])  # a store from before migration 4
    vectors.bind_embedder(older, embedder.name, embedder.dimension)
    assert partition_indexes(older) == {"memory_vec_chunks_partition", "episode_vec_chunks_partition"}
    older.execute("DROP INDEX memory_vec_chunks_partition")  # as its tables were made then
    older.execute("DROP INDEX episode_vec_chunks_partition")
    vectors.upsert_vectors(older, "memory", [1, 2], embedder.embed(["I like tea", "My car is red"]))
    older.close()
    migrated = open_db(path, clock=clock)
    assert partition_indexes(migrated) == {"memory_vec_chunks_partition", "episode_vec_chunks_partition"}
    plan = " ".join(str(r[3]) for r in migrated.execute(
        "EXPLAIN QUERY PLAN SELECT chunk_id FROM memory_vec_chunks WHERE partition00 = 3"))
    assert "INDEX memory_vec_chunks_partition" in plan  # how sqlite-vec finds a partition's chunks
    assert vectors.knn(migrated, "memory", embedder.embed(["a drink I enjoy"])[0], 1)[0][0] == 1
    migrated.close()


def test_backup_is_taken_before_migrating_an_existing_file(tmp_path, clock):
    path = tmp_path / "engram.db"
    open_db(path, clock=clock).close()
    assert not (tmp_path / "backups").exists()  # a brand-new file has nothing to back up
    extra = Migration(LATEST_VERSION + 1, "test-only column",
                      lambda conn: conn.execute("ALTER TABLE meta ADD COLUMN note TEXT"))
    migrated = open_db(path, clock=clock, migrations=(*MIGRATIONS, extra))
    assert migrated.schema_version() == LATEST_VERSION + 1
    assert migrated.scalar("SELECT name FROM schema_migrations WHERE version = ?", (extra.version,)) == extra.name
    migrated.close()
    (copy,) = (tmp_path / "backups").glob("engram-*.db")
    assert f"before-v{extra.version}" in copy.name
    old = open_db(copy, clock=clock)  # the backup is the file as it was, at the old version
    assert old.schema_version() == LATEST_VERSION
    old.close()


def test_a_failing_migration_leaves_the_schema_version_unchanged(tmp_path, clock):
    path = tmp_path / "engram.db"
    open_db(path, clock=clock).close()

    def broken(conn):
        conn.execute("CREATE TABLE half_done(x)")
        raise RuntimeError("migration bug")

    with pytest.raises(RuntimeError):
        open_db(path, clock=clock, migrations=(*MIGRATIONS, Migration(LATEST_VERSION + 1, "broken", broken)))
    again = open_db(path, clock=clock)
    assert again.schema_version() == LATEST_VERSION
    assert again.scalar("SELECT count(*) FROM sqlite_schema WHERE name = 'half_done'") == 0
    again.close()


def test_backups_are_rotated(db, tmp_path):
    folder = tmp_path / "rotating"
    made = []
    for n in range(7):
        made.append(backup(db.conn, folder, label=f"n{n}", keep=3))
        os.utime(made[-1], (1_000_000 + n, 1_000_000 + n))  # distinct ages even within one second
    assert sorted(p.name for p in folder.glob("engram-*.db")) == sorted(p.name for p in made[-3:])


def test_file_and_folder_are_private(tmp_path, clock):
    folder = tmp_path / "data"
    database = open_db(folder / "engram.db", clock=clock)
    database.execute("INSERT INTO meta(key, value) VALUES ('x', 'y')")
    for path in (folder / "engram.db", folder / "engram.db-wal"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    copy = backup(database.conn, folder / "backups")
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "backups").stat().st_mode) == 0o700
    database.close()


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path, clock):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my private notes, not a database\n" * 100)
    before = _digest(path)
    with pytest.raises(NotADatabase, match="not an SQLite database"):
        open_db(path, clock=clock)
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_corrupt_sqlite_file_is_refused_and_left_alone(tmp_path, clock):
    path = tmp_path / "broken.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    before = _digest(path)
    with pytest.raises(NotADatabase):
        open_db(path, clock=clock)
    assert _digest(path) == before


def test_a_folder_in_place_of_the_file_is_refused(tmp_path, clock):
    (tmp_path / "engram.db").mkdir()
    with pytest.raises(NotADatabase, match="folder"):
        open_db(tmp_path / "engram.db", clock=clock)


def test_a_database_from_a_newer_engram_is_refused_unchanged(tmp_path, clock):
    path = tmp_path / "engram.db"
    newer = open_db(path, clock=clock)
    newer.execute(f"PRAGMA user_version={LATEST_VERSION + 5}")
    newer.checkpoint()
    newer.close()
    before = _digest(path)
    with pytest.raises(SchemaTooNew, match="newer Engram"):
        open_db(path, clock=clock)
    assert _digest(path) == before
    assert not (tmp_path / "backups").exists()


def test_vectors_of_another_embedder_are_refused(db):
    from core.errors import EmbedderMismatch
    vectors.bind_embedder(db, "model-a", 8)
    with pytest.raises(EmbedderMismatch, match="re-embed"):
        vectors.bind_embedder(db, "model-b", 16)
    with pytest.raises(EmbedderMismatch):
        vectors.upsert_vectors(db, "memory", [1], np.ones(16, dtype=np.float32))


def test_a_staging_copy_far_older_than_any_creation_is_cleared_whatever_its_pid_says(tmp_path):
    """A crash left it, and the pid in its name now belongs to another live process (pids are reused)."""
    import os
    import time
    from core.store.db import STAGING_STALE
    path = tmp_path / "engram.db"
    open_db(path).close()
    live = f".engram.db.new-{os.getpid()}-12345"
    old = [live, f"{live}-wal", f"{live}-shm"]
    fresh = f".engram.db.new-{os.getpid()}-67890"  # a live process's, made just now: left alone
    unrelated = [".engram.db.new-notapid-1", "engram.db.new-1-1", ".other.db.new-1-1"]
    for name in old + [fresh] + unrelated:
        (tmp_path / name).write_bytes(b"")
    then = time.time() - STAGING_STALE - 60
    for name in old + unrelated:
        os.utime(tmp_path / name, (then, then))
    open_db(path).close()
    left = {p.name for p in tmp_path.iterdir()}
    assert not left & set(old)
    assert {fresh, *unrelated} <= left
