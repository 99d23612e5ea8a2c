"""Purge: after a hard delete and a WAL checkpoint, the text is nowhere in the database's bytes."""
from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import InvalidInput
from core.memory.manage import MemoryManager
from core.store.episodes import add_episode, get_episode
from core.store.memories import add_memory, link_sources

SECRET = "Quixotrelle"  # a word that appears nowhere else
SECRET_OBJECT = "Vantablorph"


def _all_bytes(path: Path) -> bytes:
    data = b""
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-journal")):
        if name.exists():
            data += name.read_bytes()
    return data


def _variants(text: str) -> list[bytes]:
    """The raw text, its lower case (FTS5 tokens) and a Porter-ish stem prefix."""
    return [text.encode(), text.lower().encode(), text.lower()[:8].encode()]


def _assert_absent(path: Path, *texts: str) -> None:
    data = _all_bytes(path)
    for text in texts:
        for needle in _variants(text):
            assert needle not in data, f"{needle!r} is still in the database files"


@pytest.fixture
def filled(db, embedder):
    """A store big enough that FTS5 spreads over several segments and pages."""
    manager = MemoryManager(db, embedder)
    with db.transaction():
        for n in range(600):
            add_memory(db, f"Filler fact {n}: the neighbour's cat number {n} sleeps on warm cars",
                       subject=f"cat {n}", object="cars")
    return manager


def test_purged_text_is_nowhere_in_the_file(filled, db):
    episode = add_episode(db, f"Please remember my {SECRET} code is {SECRET_OBJECT}-42")
    filled.add(f"The user's {SECRET} code is {SECRET_OBJECT}-42", subject=f"{SECRET} code",
               relation="is", object=SECRET_OBJECT, source_episode_ids=[episode])
    secret_id = db.scalar("SELECT id FROM memories WHERE subject = ?", (f"{SECRET} code",))
    filled.edit(secret_id, statement=f"The user's {SECRET} code is {SECRET_OBJECT}-43")  # history holds both
    other = db.scalar("SELECT min(id) FROM memories")
    db.execute("INSERT INTO edges(a_id, b_id, weight, created_at) VALUES (?, ?, 0.9, 0)", (other, secret_id))
    from core.memory.index import index_episodes
    index_episodes(db, filled.embedder, [episode])
    db.checkpoint()
    assert SECRET.encode() in _all_bytes(db.path)  # the check below can see text when it is there

    filled.delete(secret_id)
    filled.delete_episode(episode)
    result = filled.purge()

    assert (result.memories, result.episodes) == (1, 1)
    _assert_absent(db.path, SECRET, SECRET_OBJECT)
    assert db.scalar("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (SECRET,)) == 0
    assert db.scalar("SELECT count(*) FROM edges") == 0
    assert db.scalar("SELECT count(*) FROM memory_sources") == 0
    assert db.scalar("SELECT count(*) FROM entities WHERE name LIKE ?", (f"%{SECRET}%",)) == 0
    assert db.scalar("SELECT count(*) FROM memory_vec WHERE id = ?", (secret_id,)) == 0
    assert db.scalar("SELECT count(*) FROM episode_vec WHERE id = ?", (episode,)) == 0
    assert db.scalar("PRAGMA integrity_check") == "ok"
    db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
    assert db.scalar("SELECT count(*) FROM memories WHERE statement LIKE 'Filler%'") == 600


def test_purge_leaves_the_trash_of_other_people_and_active_rows(filled, db):
    keep = filled.add("I keep this one")
    gone = filled.add(f"{SECRET} should vanish")
    filled.delete(gone.id)
    with pytest.raises(InvalidInput, match="not in the trash"):
        filled.purge([keep.id])
    assert filled.get(keep.id).status == "active"  # the refused purge changed nothing
    assert filled.purge([gone.id]).memories == 1
    assert filled.get(keep.id).statement == "I keep this one"
    _assert_absent(db.path, SECRET)


def test_a_purged_memory_is_gone_from_its_source_but_the_episode_stays(filled, db):
    episode = add_episode(db, "an ordinary turn")
    memory = filled.add(f"{SECRET} fact", source_episode_ids=[episode])
    link_sources(db, memory.id, [episode])
    filled.delete(memory.id)
    filled.purge([memory.id])
    assert get_episode(db, episode).user_text == "an ordinary turn"


def test_a_purge_also_removes_the_backups_that_still_hold_the_text(filled, db):
    from core.store.db import backup
    folder = db.path.parent / "backups"
    before = backup(db.conn, folder, label="before-secret")  # as an upgrade would: a copy of the whole store
    memory = filled.add(f"The {SECRET} vault opens on Tuesdays")
    filled.edit(memory.id, statement="The vault opens on Tuesdays")  # the secret wording is only in history now
    holding = backup(db.conn, folder, label="before-v99")
    assert SECRET.encode() in holding.read_bytes()
    filled.delete(memory.id)
    result = filled.purge([memory.id])
    assert result.backups_removed == 1
    assert not holding.exists() and before.exists()  # the backup without the text is kept
    for path in folder.iterdir():
        assert SECRET.encode() not in path.read_bytes()


def test_a_purge_beside_another_reader_cleans_the_backups_now_and_the_wal_when_the_reader_closes(tmp_path, capsys,
                                                                                                 monkeypatch):
    """With another connection reading, the WAL cannot be truncated: the purge still removes the rows and the
    backups that hold the text, says the rest is pending, and the next open finishes it."""
    import apsw

    from app.cli.main import run_cli
    from core.store.db import backup, open_db
    from tests.fakes import HashEmbedder

    monkeypatch.setattr("models.embeddings.load_embedder", lambda *a, **k: HashEmbedder())
    folder = tmp_path / "data"
    assert run_cli(["--data-dir", str(folder), "memory", "add", f"My {SECRET} code is {SECRET_OBJECT}"]) == 0
    path = folder / "engram.db"
    db = open_db(path)
    backup(db.conn, folder / "backups", label="manual")
    db.close()
    assert run_cli(["--data-dir", str(folder), "memory", "delete", "1"]) == 0
    reader = apsw.Connection(str(path))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memories").fetchall()  # holds a snapshot: the WAL cannot be reset
    monkeypatch.setattr("core.store.db.BUSY_TIMEOUT_MS", 50)
    capsys.readouterr()
    assert run_cli(["--data-dir", str(folder), "memory", "purge", "1", "1"]) == 0
    out = capsys.readouterr().out
    assert "purged 1 memory and 0 episodes" in out and "removed 1 upgrade backup" in out
    assert "pending until the other reader closes" in out
    assert list((folder / "backups").glob("engram-*.db")) == []
    reader.execute("COMMIT")
    reader.close()
    again = open_db(path)  # the next open finishes the scrub
    assert not again.scrub_pending()
    again.close()
    _assert_absent(path, SECRET, SECRET_OBJECT)
