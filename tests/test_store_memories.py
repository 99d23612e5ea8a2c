"""Memories in the store: triples, flags, validity, filters, entities, and a history row for every change."""
from __future__ import annotations

import pytest

from core.errors import InvalidInput, NotFound
from core.store import entities, history
from core.store import memories as m
from core.store.episodes import add_episode


def _actions(db, memory_id):
    return [entry.action for entry in history.history(db, memory_id)]


def test_add_and_get_a_triple_with_sources(db, clock):
    episode = add_episode(db, "My sister Ana moved to Lisbon")
    memory_id = m.add_memory(db, "Ana lives in Lisbon", subject="Ana", relation="lives in", object="Lisbon",
                             kind="semantic", critical=False, confidence=0.8, source_episode_ids=[episode])
    memory = m.get_memory(db, memory_id)
    assert (memory.subject, memory.relation, memory.object) == ("Ana", "lives in", "Lisbon")
    assert memory.source_episode_ids == (episode,)
    assert memory.created_at == clock.now == memory.valid_from
    assert memory.status == "active"
    assert {(e.name, role) for e, role in entities.entities_of(db, memory_id)} == {("Ana", "subject"),
                                                                                  ("Lisbon", "object")}
    assert _actions(db, memory_id) == ["create"]


def test_entities_are_shared_across_memories_regardless_of_case(db):
    first = m.add_memory(db, "Ana lives in Lisbon", subject="Ana", object="Lisbon")
    second = m.add_memory(db, "ana likes jazz", subject="ana", object="jazz")
    ana = entities.find_entity(db, "ANA")
    assert entities.memories_of(db, ana.id) == [first, second]


def test_update_keeps_the_old_version_in_history(db, clock):
    memory_id = m.add_memory(db, "Ana lives in Lisbon", subject="Ana", object="Lisbon")
    clock.advance(days=1)
    after = m.update_memory(db, memory_id, statement="Ana lives in Porto", object="Porto", reason="she moved")
    assert after.statement == "Ana lives in Porto" and after.updated_at == clock.now
    entry = history.history(db, memory_id)[-1]
    assert (entry.action, entry.reason) == ("update", "she moved")
    assert entry.old_value["statement"] == "Ana lives in Lisbon"
    assert entry.new_value["object"] == "Porto"
    assert entities.find_entity(db, "Lisbon") is None  # no memory points at it any more
    assert m.update_memory(db, memory_id, statement="Ana lives in Porto") == after  # no change, no row
    assert _actions(db, memory_id) == ["create", "update"]


def test_flags_record_pin_unpin_protect_unprotect(db):
    memory_id = m.add_memory(db, "I am allergic to peanuts", critical=True)
    m.set_flag(db, memory_id, "pinned", True)
    m.set_flag(db, memory_id, "pinned", True)  # already pinned: nothing to record
    m.set_flag(db, memory_id, "protected", True)
    m.set_flag(db, memory_id, "protected", False)
    m.set_flag(db, memory_id, "pinned", False)
    assert _actions(db, memory_id) == ["create", "pin", "protect", "unprotect", "unpin"]
    assert m.get_memory(db, memory_id).critical is True
    with pytest.raises(InvalidInput, match="flag must be"):
        m.set_flag(db, memory_id, "deleted", True)


def test_trash_restore_and_invalidate(db, clock):
    old = m.add_memory(db, "Ana lives in Lisbon")
    new = m.add_memory(db, "Ana lives in Porto")
    assert m.trash_memory(db, old).status == "trashed"
    with pytest.raises(InvalidInput, match="already in the trash"):
        m.trash_memory(db, old)
    assert m.restore_memory(db, old).status == "active"
    with pytest.raises(InvalidInput, match="nothing to restore"):
        m.restore_memory(db, old)
    clock.advance(days=2)
    closed = m.invalidate_memory(db, old, superseded_by=new, reason="contradicted")
    assert closed.status == "invalidated" and closed.superseded_by == new
    assert closed.valid_to == closed.invalidated_at == clock.now
    assert _actions(db, old) == ["create", "delete", "restore", "invalidate"]


def test_a_protected_memory_must_be_unprotected_before_deletion(db):
    memory_id = m.add_memory(db, "My passport number is in the blue folder")
    m.set_flag(db, memory_id, "protected", True)
    with pytest.raises(InvalidInput, match="protected"):
        m.trash_memory(db, memory_id)
    assert m.get_memory(db, memory_id).status == "active"


def test_restore_brings_back_a_forgotten_memory_and_closes_its_forgetting_event(db, clock):
    memory_id = m.add_memory(db, "The old flat had a red door")
    db.execute("UPDATE memories SET forgotten_at = ? WHERE id = ?", (clock.now, memory_id))
    db.execute("INSERT INTO forgetting_events(item_type, item_id, action, retention, at) "
               "VALUES ('memory', ?, 'archive', 0.1, ?)", (memory_id, clock.now))
    assert m.restore_memory(db, memory_id).status == "active"
    assert db.scalar("SELECT restored_at FROM forgetting_events WHERE item_id = ?", (memory_id,)) == clock.now


def test_list_filters_by_kind_flags_and_status(db, clock):
    ids = {}
    for name, kind in (("a", "semantic"), ("b", "episodic"), ("c", "summary"), ("d", "semantic")):
        ids[name] = m.add_memory(db, f"memory {name}", kind=kind, critical=name == "d")
        clock.advance(1)
    m.set_flag(db, ids["a"], "pinned", True)
    m.set_flag(db, ids["b"], "protected", True)
    m.trash_memory(db, ids["c"])
    m.invalidate_memory(db, ids["d"])

    def listed(**filters):
        return [memory.id for memory in m.list_memories(db, **filters)]

    assert listed() == [ids["b"], ids["a"]]  # active, newest first
    assert listed(status=None) == [ids["d"], ids["c"], ids["b"], ids["a"]]
    assert listed(status="trashed") == [ids["c"]]
    assert listed(status="invalidated") == [ids["d"]]
    assert listed(kind="semantic", status=None) == [ids["d"], ids["a"]]
    assert listed(pinned=True) == [ids["a"]] and listed(protected=True) == [ids["b"]]
    assert listed(critical=True, status=None) == [ids["d"]]
    assert m.count_memories(db) == 2 and m.count_memories(db, status=None) == 4
    with pytest.raises(InvalidInput, match="status must be"):
        m.list_memories(db, status="gone")


def test_bad_values_are_refused_before_anything_changes(db):
    memory_id = m.add_memory(db, "Ana lives in Lisbon")
    count = db.scalar("SELECT count(*) FROM memory_history")
    for changes in ({"statement": "   "}, {"kind": "dream"}, {"confidence": 1.5}, {"importance": float("nan")},
                    {"subject": "x" * 2001}):
        with pytest.raises(InvalidInput):
            m.update_memory(db, memory_id, **changes)
    with pytest.raises(InvalidInput):
        m.add_memory(db, "fine", confidence="high")
    with pytest.raises(NotFound):
        m.add_memory(db, "from nowhere", source_episode_ids=[999])
    assert m.get_memory(db, memory_id).statement == "Ana lives in Lisbon"
    assert db.scalar("SELECT count(*) FROM memories") == 1
    assert db.scalar("SELECT count(*) FROM memory_history") == count


def test_editing_a_trashed_memory_is_refused(db):
    memory_id = m.add_memory(db, "Ana lives in Lisbon")
    m.trash_memory(db, memory_id)
    with pytest.raises(InvalidInput, match="restore it"):
        m.update_memory(db, memory_id, statement="changed")


def test_history_is_append_only(db):
    memory_id = m.add_memory(db, "Ana lives in Lisbon")
    import apsw
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        db.execute("UPDATE memory_history SET reason = 'rewritten' WHERE memory_id = ?", (memory_id,))
