"""Two processes binding a fresh store's embedder at the same moment: the same embedder both succeed; a different
one gets the one-line refusal, never "UNIQUE constraint failed: meta.key"."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from core.errors import EmbedderMismatch
from core.store import vectors
from core.store.db import Database, open_db
from tests.processkit import at_once
from core.store.memories import count_memories

ROOT = Path(__file__).resolve().parents[1]

# Opens the store, says "ready", waits for "go" on stdin (the barrier), then binds the embedder the way the product
# does on a fresh store: "add" as `engram memory add` (inside its write transaction), "turn" as the app after a chat
# turn (index_episodes on the stored turn, outside any transaction).
CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from core.errors import EngramError
    from core.memory.index import index_episodes
    from core.memory.manage import MemoryManager
    from core.store.db import open_db
    from core.store.episodes import add_episode
    from tests.fakes import HashEmbedder
    db = open_db({path!r})
    embedder = HashEmbedder()
    embedder.name = {embedder!r}
    episode = add_episode(db, "hello from {embedder}", "hi") if {action!r} == "turn" else None
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        if episode is None:
            MemoryManager(db, embedder).add("note from {embedder}")
        else:
            index_episodes(db, embedder, [episode])
        print(json.dumps({{"ok": True}}), flush=True)
    except EngramError as exc:
        print(json.dumps({{"ok": False, "error": type(exc).__name__, "message": str(exc)}}), flush=True)
""")


def _race(path: Path, children_of: tuple[tuple[str, str], tuple[str, str]]) -> list[dict]:
    """Both children bind at once: each is released from the barrier only when both have opened the store. A
    traceback (the UNIQUE constraint) ends a child with status 1 and fails the test."""
    outputs = at_once([CHILD.format(root=str(ROOT), path=str(path), action=action, embedder=name)
                       for action, name in children_of])
    return [json.loads(out.splitlines()[-1]) for out in outputs]


def _fresh_store(folder: Path) -> Path:
    """Created and migrated, but never bound: no embedder has written to it yet."""
    folder.mkdir()
    database = open_db(folder / "engram.db")
    assert vectors.bound_embedder(database) is None
    database.close()
    return folder / "engram.db"


@pytest.mark.parametrize("actions", [("turn", "turn"), ("turn", "add"), ("add", "turn"), ("add", "add")])
def test_two_processes_binding_the_same_embedder_at_once_both_succeed(tmp_path, actions):
    path = _fresh_store(tmp_path / "store")
    reports = _race(path, tuple((action, "hash-embedder") for action in actions))
    assert reports == [{"ok": True}, {"ok": True}]
    database = open_db(path)
    try:
        assert vectors.bound_embedder(database) == ("hash-embedder", 32)
        assert count_memories(database) == actions.count("add")
        assert len(vectors.get_vectors(database, "episode", [1, 2])) == actions.count("turn")
    finally:
        database.close()


def test_two_processes_binding_different_embedders_at_once_one_is_refused_in_words(tmp_path):
    path = _fresh_store(tmp_path / "store")
    reports = _race(path, (("turn", "hash-embedder"), ("turn", "other-embedder")))
    assert sorted(r["ok"] for r in reports) == [False, True]
    refused = next(r for r in reports if not r["ok"])
    assert refused["error"] == "EmbedderMismatch" and "re-embed" in refused["message"]
    assert "\n" not in refused["message"]
    database = open_db(path)
    try:
        winner = "hash-embedder" if reports[0]["ok"] else "other-embedder"
        assert vectors.bound_embedder(database) == (winner, 32)
        assert len(vectors.get_vectors(database, "episode", [1, 2])) == 1  # the refused one wrote no vector
    finally:
        database.close()


class BindsFirstElsewhere(Database):
    """A connection whose first write transaction waits (the barrier) until another connection has bound the store:
    the interleaving two racing processes hit, made certain."""

    other: Database | None = None
    other_embedder: tuple[str, int] = ("", 0)

    def transaction(self):
        if self.other is not None:
            other, self.other = self.other, None
            vectors.bind_embedder(other, *self.other_embedder)
        return super().transaction()


@pytest.mark.parametrize("theirs, refused", [(("model-a", 16), False), (("model-b", 16), True),
                                             (("model-a", 24), True)])
def test_a_bind_that_loses_the_race_rereads_the_binding_under_the_write_lock(tmp_path, theirs, refused):
    path = _fresh_store(tmp_path / "store")
    first = open_db(path)
    mine = BindsFirstElsewhere(conn=first.conn, path=path)
    other = open_db(path)
    mine.other, mine.other_embedder = other, theirs
    try:
        if refused:
            with pytest.raises(EmbedderMismatch, match="re-embed"):
                vectors.bind_embedder(mine, "model-a", 16)
        else:
            vectors.bind_embedder(mine, "model-a", 16)
        assert vectors.bound_embedder(mine) == theirs
        assert mine.scalar("SELECT count(*) FROM meta WHERE key = 'embedder_name'") == 1
    finally:
        other.close()
        first.close()
