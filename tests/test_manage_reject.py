""""This is wrong" and "Forget everything" over the real store and the real MiniLM."""
from __future__ import annotations

import pytest

from core.assistant import Assistant
from core.config import Settings
from core.errors import InvalidInput
from core.memory.manage import MemoryManager
from core.memory.rejected import REASON
from core.store import health, rejections, vectors
from core.store.db import open_db
from core.store.sessions import create_session
from tests.fakes import ScriptedChatModel, ScriptedStructuredModel


def fact(statement: str, relation: str, obj: str) -> dict:
    return {"subject": "user", "relation": relation, "object": obj, "statement": statement, "confidence": 90,
            "kind": "semantic", "critical": False, "source": "user_said", "when": ""}


def learn_from(db, embedder, clock, user_text: str, facts: list[dict]):
    structured = ScriptedStructuredModel({"engram_facts": [{"facts": facts}],
                                          "reconcile_decision": [{"decision": "new", "target": 0, "reason": ""}],
                                          "usefulness_rating": [{"useful": []}]})
    assistant = Assistant(db, embedder, ScriptedChatModel(["Noted."]), structured, Settings(), clock)
    return assistant.reply(create_session(db, "chat"), user_text).learned


def active_statements(db) -> list[str]:
    return [r[0] for r in db.execute("SELECT statement FROM active_memories ORDER BY id")]


def test_a_fact_said_to_be_wrong_is_not_learned_again(db, embedder, clock):
    # "it relaxes me" is left for the model to read (core.memory.unread): the model's fact is the one learned
    first = learn_from(db, embedder, clock, "I love jazz music, it relaxes me.",
                       [fact("The user loves jazz.", "loves", "jazz")])
    [outcome] = first.outcomes
    MemoryManager(db, embedder).reject(outcome.memory_id)
    assert active_statements(db) == []
    # said again later, worded differently by the model: the same triple, so it is left out, with its reason
    again = learn_from(db, embedder, clock, "I really love jazz, jazz is my thing. I play piano.",
                       [fact("User really loves jazz", "love", "Jazz"),
                        fact("The user plays piano.", "plays", "piano")])
    assert active_statements(db) == ["The user plays piano."]
    assert [why for _, why in again.dropped] == [REASON]
    assert dict(reason_counts_of(again)) == {REASON: 1}


def reason_counts_of(report) -> dict[str, int]:
    from core.memory.grounding import reason_counts
    return reason_counts(why for _, why in report.dropped)


def test_restoring_a_rejected_memory_lifts_the_rejection_and_a_purge_leaves_no_text(db, embedder, clock):
    manager = MemoryManager(db, embedder)
    wrong = manager.add("User drinks oat milk", subject="user", relation="drinks", object="oat milk")
    manager.reject(wrong.id)
    assert manager.get(wrong.id).status == "trashed" and rejections.count_rejections(db) == 2
    assert "you said this is wrong" in manager.show(wrong.id).history[-1].reason
    manager.restore(wrong.id)
    assert rejections.count_rejections(db) == 0  # brought back: the user no longer says it is wrong
    manager.reject(wrong.id)
    manager.purge([wrong.id], [])
    assert rejections.count_rejections(db) == 2  # still not learned again ...
    raw = (db.path.read_bytes() + db.path.with_name(db.path.name + "-wal").read_bytes()
           if db.path.with_name(db.path.name + "-wal").exists() else db.path.read_bytes())
    assert b"oat milk" not in raw  # ... and only hashes are kept, never its text


def test_adding_a_rejected_statement_by_hand_lifts_the_rejection(db, embedder):
    manager = MemoryManager(db, embedder)
    memory = manager.add("User drinks oat milk", subject="user", relation="drinks", object="oat milk")
    manager.reject(memory.id)
    manager.add("User drinks oat milk.")
    assert rejections.count_rejections(db) == 1  # the statement's key went; the triple's stays with the memory


def test_a_protected_memory_is_not_rejected(db, embedder):
    manager = MemoryManager(db, embedder)
    memory = manager.add("User is allergic to penicillin", protected=True)
    with pytest.raises(InvalidInput, match="protected"):
        manager.reject(memory.id)
    assert manager.get(memory.id).status == "active" and rejections.count_rejections(db) == 0


def test_forget_everything_backs_up_then_wipes_in_one_go_and_the_backup_restores_it(tmp_path, embedder, clock):
    path = tmp_path / "engram.db"
    db = open_db(path, clock=clock)
    learn_from(db, embedder, clock, "I love jazz music.", [fact("The user loves jazz.", "loves", "jazz")])
    manager = MemoryManager(db, embedder)
    manager.add("User lives in Lisbon", subject="user", relation="lives_in", object="Lisbon")
    db.execute("INSERT INTO hypotheses(dimension, claim, created_at, updated_at) "
               "VALUES ('tone', 'likes it short', 1, 1)")
    db.execute("INSERT INTO learning_goals(question, created_at) VALUES ('Which city?', 1)")
    before = {t: db.scalar(f"SELECT count(*) FROM {t}") for t in ("memories", "episodes", "sessions", "hypotheses",
                                                                  "learning_goals", "memory_vec_float")}
    assert all(before.values())
    result = manager.forget_everything()
    assert result.counts["memories"] == 2 and result.counts["conversations"] == 1
    assert all(db.scalar(f"SELECT count(*) FROM {t}") == 0 for t in before)
    assert db.scalar("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'Lisbon'") == 0
    assert vectors.knn(db, "memory", embedder.embed(["Lisbon"])[0], 3) == []
    assert result.backup.is_file() and result.backup.parent == tmp_path / "backups"
    db.close()
    health.restore(path, result.backup)  # what `engram doctor --restore` does with the newest good backup
    again = open_db(path, clock=clock)
    assert {t: again.scalar(f"SELECT count(*) FROM {t}") for t in before} == before
    assert vectors.knn(again, "memory", embedder.embed(["Where do I live?"])[0], 1)
    again.close()


def test_forget_everything_keeps_nothing_half_done_when_it_fails(tmp_path, embedder, clock, monkeypatch):
    from core.store import wipe
    db = open_db(tmp_path / "engram.db", clock=clock)
    MemoryManager(db, embedder).add("User lives in Lisbon")
    monkeypatch.setattr(wipe, "_stop_jobs", lambda _db: (_ for _ in ()).throw(RuntimeError("disk gone")))
    with pytest.raises(RuntimeError):
        MemoryManager(db, embedder).forget_everything()
    assert db.scalar("SELECT count(*) FROM memories") == 1 and db.scalar("SELECT count(*) FROM memory_vec_float") == 1
    db.close()


def test_a_write_between_the_backup_and_the_wipe_is_in_the_backup(tmp_path, embedder, clock, monkeypatch):
    """Another process (an idle-time job) commits after the first backup: that copy is dropped and a new one made,
    so what the wipe erases is always in the backup."""
    from core.store import db as store_db
    path = tmp_path / "engram.db"
    db = open_db(path, clock=clock)
    MemoryManager(db, embedder).add("User lives in Lisbon")
    real_backup, calls = store_db.backup, []

    def backup_then_someone_writes(conn, folder, **kwargs):
        made = real_backup(conn, folder, **kwargs)
        calls.append(made)
        if len(calls) == 1:
            other = open_db(path, clock=clock)
            other.execute("INSERT INTO sessions(title, created_at, updated_at) VALUES ('late', 1, 1)")
            other.close()
        return made
    monkeypatch.setattr(store_db, "backup", backup_then_someone_writes)
    result = MemoryManager(db, embedder).forget_everything()
    assert len(calls) == 2 and result.backup == calls[1] and len(list(result.backup.parent.iterdir())) == 1
    assert result.counts["conversations"] == 1 and db.scalar("SELECT count(*) FROM sessions") == 0
    db.close()
    kept = open_db(result.backup, clock=clock)
    assert kept.scalar("SELECT title FROM sessions") == "late"  # the late write is in the backup
    kept.close()


def test_bring_back_undoes_forget_everything_in_place_but_not_over_new_learning(tmp_path, embedder, clock):
    from core.store import wipe
    db = open_db(tmp_path / "engram.db", clock=clock)
    learn_from(db, embedder, clock, "I love jazz music.", [fact("The user loves jazz.", "loves", "jazz")])
    manager = MemoryManager(db, embedder)
    manager.add("User lives in Lisbon", subject="user", relation="lives_in", object="Lisbon")
    before = wipe.counts(db)
    result = manager.forget_everything()
    assert wipe.bring_back(db, result.backup) == before  # the same connection, still open
    assert vectors.knn(db, "memory", embedder.embed(["Where do I live?"])[0], 1)[0][0] == 2
    assert db.scalar("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'Lisbon'") == 1
    result = manager.forget_everything()
    manager.add("User lives in Porto")
    with pytest.raises(InvalidInput, match="learned new things"):
        wipe.bring_back(db, result.backup)
    assert [r[0] for r in db.execute("SELECT statement FROM memories")] == ["User lives in Porto"]
    db.close()
