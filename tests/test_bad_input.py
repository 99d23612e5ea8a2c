"""Bad input gets a clear error and changes nothing: proved by row counts and file hashes."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import run_cli
from core.errors import InvalidInput, NotFound
from core.memory.manage import MemoryManager
from core.store.db import open_db
from core.store.migrations import LATEST_VERSION

ROOT = Path(__file__).resolve().parents[1]
ONE_MB = "x" * (1024 * 1024)
TABLES = ("memories", "memory_history", "episodes", "sessions", "entities", "memory_sources", "edges")


def _files_digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _counts(db) -> dict[str, int]:
    return {t: db.scalar(f"SELECT count(*) FROM {t}") for t in TABLES}


@pytest.fixture
def store(tmp_path, embedder, monkeypatch, capsys):
    """A data folder holding one memory, closed and checkpointed so its bytes can be compared."""
    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: embedder)
    folder = tmp_path / "data"
    assert run_cli(["--data-dir", str(folder), "memory", "add", "Ana lives in Lisbon"]) == 0
    capsys.readouterr()
    return folder


def _refused(folder: Path, capsys, *argv: str, message: str) -> None:
    before = _files_digest(folder)
    code = run_cli(["--data-dir", str(folder), *argv])
    err = capsys.readouterr().err
    assert code in (1, 2), err  # 2: the command line itself did not parse (a number out of range, a bad id)
    assert err.startswith("engram: ") and message in err and err.count("\n") == 1, err
    assert _files_digest(folder) == before, "a refused command changed the data folder"


@pytest.mark.parametrize("argv, message", [
    (("memory", "add", ""), "statement is empty"),
    (("memory", "add", "  \t\n "), "statement is empty"),
    (("memory", "add", ONE_MB), "too long"),
    (("memory", "add", "nul\x00byte"), "NUL byte"),
    (("memory", "add", "bad \udcff utf-8"), "not valid UTF-8"),
    (("memory", "add", "fine", "--subject", "nul\x00"), "NUL byte"),
    (("memory", "add", "fine", "--confidence", "3"), "between 0 and 1"),
    (("memory", "search", ""), "query is empty"),
    (("memory", "search", "   "), "query is empty"),
    (("memory", "show", "999"), "no memory with id 999"),
    (("memory", "show", "abc"), "is not an id"),
    (("memory", "pin", "999"), "no memory with id 999"),
    (("memory", "protect", "zzz"), "not an id"),
    (("memory", "edit", "999", "--statement", "x"), "no memory with id 999"),
    (("memory", "edit", "1", "--statement", ONE_MB), "too long"),
    (("memory", "edit", "1"), "nothing to change"),
    (("memory", "delete", "1", "999"), "no memory with id 999"),  # all or none: #1 stays active
    (("memory", "restore", "1"), "nothing to restore"),
    (("memory", "purge", "1"), "not in the trash"),
    (("memory", "purge", "999"), "no memory with id 999"),
    (("memory", "import", "/no/such/file.json"), "is not a file"),
])
def test_cli_refuses_bad_input_and_changes_no_byte(store, capsys, argv, message):
    _refused(store, capsys, *argv, message=message)


def test_cli_refuses_a_file_that_is_not_sqlite(tmp_path, capsys):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "engram.db").write_bytes(b"PK\x03\x04 definitely a zip file, not a database" * 50)
    _refused(folder, capsys, "memory", "list", message="is not an SQLite database")


def test_cli_refuses_a_database_from_a_newer_schema(tmp_path, capsys, clock):
    folder = tmp_path / "data"
    newer = open_db(folder / "engram.db", clock=clock)
    newer.execute(f"PRAGMA user_version={LATEST_VERSION + 1}")
    newer.close()
    _refused(folder, capsys, "memory", "list", message="newer Engram")
    assert not (folder / "backups").exists()


def test_a_malformed_import_changes_no_byte(store, capsys, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "engram-export", "version": 1, "memories": [{"id": 1}]}', encoding="utf-8")
    _refused(store, capsys, "memory", "import", str(path), message="memories[0] has no statement")


def test_invalid_utf8_bytes_on_the_real_command_line(store):
    before = _files_digest(store)
    done = subprocess.run([sys.executable, "-m", "app", "--data-dir", str(store), "memory", "add",
                           b"caf\xe9 latin-1 bytes"], cwd=ROOT, capture_output=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 1
    assert done.stderr == b"engram: statement is not valid UTF-8 (character 4 is not text)\n"
    assert _files_digest(store) == before


def test_core_refuses_bad_text_and_unknown_ids_without_writing(db, embedder):
    manager = MemoryManager(db, embedder)
    manager.add("Ana lives in Lisbon")
    before = _counts(db)
    for text in ("", "   ", ONE_MB, "a\x00b", b"\xff\xfe", "\udc80", 42, None):
        with pytest.raises(InvalidInput):
            manager.add(text)
    for call in (manager.pin, manager.protect, manager.delete, manager.restore, manager.show,
                 manager.delete_episode, manager.protect_episode):
        with pytest.raises(NotFound):
            call(12345)
    with pytest.raises(NotFound):
        manager.edit(12345, statement="x")
    with pytest.raises(NotFound):
        manager.purge([12345])
    with pytest.raises(InvalidInput):
        manager.edit(1, statement="\x00")
    with pytest.raises(NotFound):
        manager.invalidate(1, superseded_by=12345)
    with pytest.raises(InvalidInput):
        manager.list(status="deleted-ish")
    assert _counts(db) == before
    assert manager.get(1).status == "active" and manager.get(1).statement == "Ana lives in Lisbon"
