"""Files Engram did not create, and a damaged file: refused with a clear message, never written into or
re-permissioned."""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import apsw
import pytest

from core.errors import StoreCorrupt, StoreRefused
from core.memory.manage import MemoryManager
from core.store import health
from core.store.db import backup, open_db
from tests.fakes import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_store(path: Path, memories: int = 200) -> Path:
    db = open_db(path)
    manager = MemoryManager(db, HashEmbedder())
    for n in range(memories):
        manager.add(f"Memory number {n}: the user once mentioned something worth keeping, item {n}.")
    db.checkpoint()
    db.close()
    return path


def damage(path: Path) -> None:
    """Overwrite a page in the middle of the file, as a failing disk or a stray write would."""
    page = 4096
    pages = path.stat().st_size // page
    with path.open("r+b") as fh:
        fh.seek((pages // 2) * page)
        fh.write(b"\xff" * page)


def test_a_shared_folder_given_as_data_folder_keeps_its_mode(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    open_db(shared / "engram.db").close()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE((shared / "engram.db").stat().st_mode) == 0o600  # the file Engram made is private


def test_a_read_only_store_is_refused_and_stays_read_only(tmp_path):
    path = make_store(tmp_path / "engram.db", memories=3)
    os.chmod(path, 0o400)
    before = digest(path)
    with pytest.raises(StoreRefused, match="read-only"):
        open_db(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o400 and digest(path) == before


def test_another_applications_sqlite_file_is_refused_untouched(tmp_path):
    path = tmp_path / "engram.db"
    other = apsw.Connection(str(path))
    other.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, amount REAL); INSERT INTO invoices VALUES (1, 9.5)")
    other.close()
    before = digest(path)
    with pytest.raises(StoreRefused, match="another application"):
        open_db(path)
    assert digest(path) == before
    check = apsw.Connection(str(path))
    assert [r[0] for r in check.execute("SELECT name FROM sqlite_schema")] == ["invoices"]
    check.close()


def test_an_empty_file_is_an_error_never_a_fresh_start(tmp_path):
    path = tmp_path / "engram.db"
    path.write_bytes(b"")
    with pytest.raises(StoreRefused, match="empty"):
        open_db(path)
    assert path.stat().st_size == 0


def test_a_damaged_file_is_refused_on_open_and_nothing_is_written_into_it(tmp_path):
    path = make_store(tmp_path / "engram.db")
    damage(path)
    before = digest(path)
    with pytest.raises(StoreCorrupt, match="engram doctor"):
        open_db(path)
    assert digest(path) == before
    assert health.marker_path(path).exists()
    with pytest.raises(StoreCorrupt):  # and every later open, until the user acts
        open_db(path)


def test_the_newest_good_backup_is_restored_and_the_damaged_file_kept_aside(tmp_path):
    path = make_store(tmp_path / "engram.db", memories=20)
    db = open_db(path)
    good = backup(db.conn, tmp_path / "backups", label="manual")
    db.close()
    damage(path)
    with pytest.raises(StoreCorrupt):
        open_db(path)
    (tmp_path / "backups" / "engram-00000000-000000-broken.db").write_bytes(b"SQLite format 3\x00" + b"\x01" * 5000)
    candidates = health.good_backups(tmp_path / "backups")
    newest_good = next(p for p, result in candidates if result.ok)
    assert newest_good == good
    aside = health.restore(path, newest_good)
    assert aside.exists() and not health.marker_path(path).exists()
    restored = open_db(path)
    assert restored.scalar("SELECT count(*) FROM memories") == 20
    restored.close()


def test_rebuild_remakes_the_full_text_index(tmp_path):
    path = make_store(tmp_path / "engram.db", memories=5)
    conn = apsw.Connection(str(path))
    done = health.rebuild_indexes(conn)
    assert any("memories_fts" in d for d in done)
    assert conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'worth'").fetchall()[0][0] == 5
    conn.close()


def test_a_summary_left_without_its_vector_is_repaired_by_the_next_forgetting_pass(tmp_path):
    """A kill after `forget --run` committed, before the summary's vector was written."""
    from core.config import Settings
    from core.memory.forget import forgetting_pass
    from core.memory.recall import recall
    from core.store.memories import add_memory

    db = open_db(tmp_path / "engram.db")
    embedder = HashEmbedder()
    MemoryManager(db, embedder).add("bound")
    orphan = add_memory(db, "Summary of a week of talk about gardening and tomatoes.", kind="summary")
    from core.store import vectors
    assert vectors.ids_without_vectors(db, "memory") == [orphan]
    forgetting_pass(db, Settings(), embedder=embedder)
    assert vectors.ids_without_vectors(db, "memory") == []
    found = recall(db, embedder, "Summary of a week of talk about gardening and tomatoes.", kinds=["memory"], k=1)
    assert found.ids("memory") == [orphan]
    db.close()


def test_engram_doctor_checks_restores_and_rebuilds_from_the_command_line(tmp_path, capsys, monkeypatch):
    from app.cli.main import run_cli
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: HashEmbedder())
    folder = tmp_path / "data"
    assert run_cli(["--data-dir", str(folder), "memory", "add", "Ana lives in Lisbon."]) == 0
    assert run_cli(["--data-dir", str(folder), "doctor"]) == 0
    assert "sound" in capsys.readouterr().out
    db = open_db(folder / "engram.db")
    backup(db.conn, folder / "backups", label="manual")
    MemoryManager(db, HashEmbedder()).add("Later fact.")
    db.close()
    assert run_cli(["--data-dir", str(folder), "doctor", "--rebuild"]) == 0
    out = capsys.readouterr().out
    assert "full-text index" in out and "packed 2 vector partitions for recall" in out  # two facts, two shards
    damage(folder / "engram.db") if (folder / "engram.db").stat().st_size > 8 * 4096 else \
        (folder / "engram.db").write_bytes((folder / "engram.db").read_bytes()[:4096] + b"\xff" * 8192)
    assert run_cli(["--data-dir", str(folder), "memory", "add", "x"]) == 1
    assert "engram doctor" in capsys.readouterr().err
    assert run_cli(["--data-dir", str(folder), "doctor"]) == 1
    assert "damaged" in capsys.readouterr().out
    assert run_cli(["--data-dir", str(folder), "doctor", "--restore"]) == 0
    assert "kept as" in capsys.readouterr().out
    assert run_cli(["--data-dir", str(folder), "memory", "list"]) == 0
    assert "Ana lives in Lisbon." in capsys.readouterr().out


def _failing_on_row(db, row: int) -> str:
    """A query whose step at `row` meets corruption, as a damaged page read mid-scan would."""
    def check(n):
        if n == row:
            raise apsw.CorruptError("database disk image is malformed")
        return n
    db.conn.create_scalar_function("check_page", check, 1)
    return "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 5) SELECT check_page(x) FROM n"


@pytest.mark.parametrize("read", ["iterate", "fetchall"])
def test_corruption_met_mid_read_is_reported_and_marked_however_the_rows_are_read(tmp_path, read):
    db = open_db(tmp_path / "engram.db")
    try:
        cursor = db.execute(_failing_on_row(db, 3))
        with pytest.raises(StoreCorrupt):
            list(cursor) if read == "iterate" else cursor.fetchall()
        assert health.marker_path(tmp_path / "engram.db").exists()
    finally:
        db.close()


def test_fetchall_reads_rows_without_a_python_call_each(tmp_path):
    db = open_db(tmp_path / "engram.db")
    try:
        assert type(db.execute("SELECT 1")).__next__ is apsw.Cursor.__next__  # the C step, not a Python override
        assert [r[0] for r in db.execute("SELECT value FROM json_each('[1,2,3]')")] == [1, 2, 3]
    finally:
        db.close()
