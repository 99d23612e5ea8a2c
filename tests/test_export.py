"""Export and import: a documented JSON format that carries history; imports remap ids and are all-or-nothing."""
from __future__ import annotations

import json

import pytest

from core.errors import InvalidInput
from core.memory.manage import MemoryManager
from core.store import export, history, vectors
from core.store.db import open_db
from core.store.episodes import add_episode, get_episode
from core.store.sessions import create_session

COUNTED = ("sessions", "episodes", "memories", "memory_history", "edges", "memory_sources", "memory_vec")


def _counts(db):
    return {t: db.scalar(f"SELECT count(*) FROM {t}") for t in COUNTED}


@pytest.fixture
def source(db, embedder):
    """A small store with every kind of row the format carries."""
    manager = MemoryManager(db, embedder)
    session = create_session(db, "Planning", instructions="Be brief.")
    episode = add_episode(db, "My sister Ana moved to Porto", "Noted!", session_id=session)
    old = manager.add("Ana lives in Lisbon", subject="Ana", relation="lives in", object="Lisbon")
    new = manager.add("Ana lives in Porto", subject="Ana", relation="lives in", object="Porto",
                      source_episode_ids=[episode], pinned=True, critical=True)
    manager.invalidate(old.id, superseded_by=new.id, reason="she moved")
    manager.edit(new.id, statement="Ana lives in Porto now", reason="clarified")
    db.execute("INSERT INTO edges(a_id, b_id, kind, weight, created_at) VALUES (?, ?, 'supersedes', 0.8, 1)",
               (old.id, new.id))
    db.execute("UPDATE episodes SET summary_id = ? WHERE id = ?", (new.id, episode))
    return manager


def test_export_carries_triples_flags_validity_sources_and_history(source, tmp_path):
    path = tmp_path / "export.json"
    counts = source.export_to(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["format"], data["version"]) == ("engram-export", export.FORMAT_VERSION)
    assert counts == {"sessions": 1, "episodes": 1, "memories": 2, "history": len(data["history"]), "edges": 1}
    porto = next(m for m in data["memories"] if m["object"] == "Porto")
    lisbon = next(m for m in data["memories"] if m["object"] == "Lisbon")
    assert porto["pinned"] is True and porto["critical"] is True and porto["source_episode_ids"] == [1]
    assert lisbon["invalidated_at"] is not None and lisbon["superseded_by"] == porto["id"]
    assert [h["action"] for h in data["history"] if h["memory_id"] == porto["id"]] == ["create", "pin", "update"]


def test_import_into_a_non_empty_store_remaps_ids_and_reembeds(source, tmp_path, embedder, clock):
    path = tmp_path / "export.json"
    source.export_to(path)
    target_db = open_db(tmp_path / "other" / "engram.db", clock=clock)
    target = MemoryManager(target_db, embedder)
    existing = target.add("I already remember this")
    result = target.import_from(path)

    assert existing.id not in result.memories.values()
    assert target.get(existing.id).statement == "I already remember this"
    porto = target.get(result.memories[2])
    lisbon = target.get(result.memories[1])
    assert porto.statement == "Ana lives in Porto now" and porto.pinned and porto.critical
    assert lisbon.superseded_by == porto.id and lisbon.status == "invalidated"
    episode = get_episode(target_db, result.episodes[1])
    assert porto.source_episode_ids == (episode.id,) and episode.summary_id == porto.id
    assert episode.session_id == result.sessions[1]
    actions = [h.action for h in history.history(target_db, porto.id)]
    assert actions == ["create", "pin", "update", "create"]  # the original log, then the import itself
    assert history.history(target_db, porto.id)[-1].reason == "imported from an export (id 2 there)"
    assert target_db.scalar("SELECT count(*) FROM edges WHERE kind = 'supersedes'") == 1
    assert set(vectors.get_vectors(target_db, "memory", [porto.id, lisbon.id])) == {porto.id, lisbon.id}
    assert set(vectors.get_vectors(target_db, "episode", [episode.id])) == {episode.id}
    target_db.close()


@pytest.mark.parametrize("damage, message", [
    (lambda d: d.update(format="something-else"), "not an Engram export"),
    (lambda d: d.update(version=99), "format version 99"),
    (lambda d: d.update(memories="nope"), "memories must be a list"),
    (lambda d: d["memories"][1].update(statement=None), r"memories\[1\].statement"),
    (lambda d: d["memories"][1].update(confidence=7), "expected 0 to 1"),
    (lambda d: d["memories"][1].update(kind="dream"), "expected one of"),
    (lambda d: d["memories"][1].update(statement="nul\u0000byte"), "NUL"),
    (lambda d: d["memories"][1].update(source_episode_ids=[77]), "refers to episode 77"),
    (lambda d: d["memories"].append(dict(d["memories"][0])), "same id twice"),
    (lambda d: d["history"].append({"memory_id": 1, "action": "explode", "at": 1.0}), "expected one of"),
    (lambda d: d["episodes"][0].pop("user_text"), "has no user_text"),
])
def test_a_malformed_file_is_refused_and_imports_nothing(source, tmp_path, damage, message):
    data = export.export_store(source.db)
    damage(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    before = _counts(source.db)
    with pytest.raises(InvalidInput, match=message):
        source.import_from(path)
    assert _counts(source.db) == before


def test_not_json_and_not_utf8_are_refused(source, tmp_path):
    before = _counts(source.db)
    for raw, message in ((b"{\"format\": ", "not valid JSON"), (b"\xff\xfe{}", "not valid UTF-8"),
                         (b'{"format": "engram-export", "version": 1, "memories": [NaN]}', "not valid JSON")):
        path = tmp_path / "bad.json"
        path.write_bytes(raw)
        with pytest.raises(InvalidInput, match=message):
            source.import_from(path)
    with pytest.raises(InvalidInput, match="is not a file"):
        source.import_from(tmp_path / "missing.json")
    assert _counts(source.db) == before


def test_a_failure_half_way_through_the_import_rolls_everything_back(source, tmp_path, monkeypatch):
    path = tmp_path / "export.json"
    source.export_to(path)
    before = _counts(source.db)

    def broken_index(*args, **kwargs):
        raise RuntimeError("embedder died")

    monkeypatch.setattr("core.memory.index.index_episodes", broken_index)
    with pytest.raises(RuntimeError):
        source.import_from(path)
    assert _counts(source.db) == before


def test_importing_the_same_export_twice_adds_nothing_the_second_time(source, tmp_path, embedder, clock):
    """Rows carry content keys: a row already in the store is recognised and not added again."""
    path = tmp_path / "export.json"
    source.export_to(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert all(len(row["key"]) == 32 for section in ("sessions", "episodes", "memories") for row in data[section])
    target_db = open_db(tmp_path / "other" / "engram.db", clock=clock)
    target = MemoryManager(target_db, embedder)
    first = target.import_from(path)
    once = _counts(target_db)
    create_session(target_db, "Another day")  # the store moves on between the two imports
    again = target.import_from(path)
    assert {t: n for t, n in _counts(target_db).items() if t != "sessions"} == {
        t: n for t, n in once.items() if t != "sessions"}
    assert _counts(target_db)["sessions"] == once["sessions"] + 1  # only the one made by hand
    assert (again.memories, again.episodes, again.sessions, again.history_rows) == ({}, {}, {}, 0)
    assert again.existing_memories == first.memories and again.existing_episodes == first.episodes
    assert again.existing_sessions == first.sessions
    target_db.close()


def test_reimporting_into_the_exporting_store_adds_nothing_and_an_old_file_without_keys_too(source, tmp_path):
    path = tmp_path / "export.json"
    source.export_to(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    for section in ("sessions", "episodes", "memories"):
        for row in data[section]:
            del row["key"]  # as written by an Engram before content keys
    path.write_text(json.dumps(data), encoding="utf-8")
    before = _counts(source.db)
    result = source.import_from(path)
    assert _counts(source.db) == before and result.memories == {}
