"""The hand-edit facade over the real store and the real MiniLM: rows and vectors move together."""
from __future__ import annotations

import numpy as np
import pytest

from core.errors import InvalidInput, NotFound, WorkStopped
from core.memory.manage import MemoryManager
from core.store import vectors


@pytest.fixture
def manager(db, embedder):
    return MemoryManager(db, embedder)


def _nearest(manager, text):
    return vectors.knn(manager.db, "memory", manager.embedder.embed([text])[0], 1)[0][0]


def test_add_writes_the_row_and_its_vector_together(manager):
    memory = manager.add("I am allergic to peanuts", subject="I", relation="allergic to", object="peanuts",
                         critical=True, pinned=True)
    manager.add("The car needs new tyres")
    assert memory.pinned and memory.critical
    assert set(vectors.get_vectors(manager.db, "memory", [memory.id])) == {memory.id}
    assert _nearest(manager, "food allergy") == memory.id


def test_a_failed_add_leaves_neither_row_nor_vector(manager):
    with pytest.raises(InvalidInput):
        manager.add("fine text", kind="dream")
    with pytest.raises(InvalidInput):
        manager.add("\x00")
    assert manager.db.scalar("SELECT count(*) FROM memories") == 0
    assert vectors.get_vectors(manager.db, "memory", [1]) == {}


def test_every_hand_edit_leaves_its_history_row(manager):
    other = manager.add("Ana lives in Porto")
    memory = manager.add("Ana lives in Lisbon", subject="Ana", object="Lisbon")
    manager.edit(memory.id, statement="Ana lives in Coimbra", object="Coimbra", reason="typo")
    manager.pin(memory.id)
    manager.unpin(memory.id)
    manager.protect(memory.id)
    manager.unprotect(memory.id)
    manager.delete(memory.id, reason="not true")
    manager.restore(memory.id)
    manager.invalidate(memory.id, superseded_by=other.id, reason="she moved to Porto")
    manager.delete(memory.id)
    details = manager.show(memory.id)
    assert [h.action for h in details.history] == [
        "create", "update", "pin", "unpin", "protect", "unprotect", "delete", "restore", "invalidate", "delete"]
    update = details.history[1]
    assert update.old_value["statement"] == "Ana lives in Lisbon" and update.reason == "typo"
    assert details.history[6].reason == "not true"
    manager.purge([memory.id], reason="asked to erase")
    purge_rows = manager.db.query("SELECT * FROM memory_history WHERE memory_id = ?", (memory.id,))
    assert [(r["action"], r["old_value"], r["new_value"], r["reason"]) for r in purge_rows] == [
        ("purge", None, None, "asked to erase")]
    with pytest.raises(NotFound):
        manager.get(memory.id)


def test_edit_remakes_the_vector(manager):
    memory = manager.add("I play the cello on Sundays")
    manager.add("The boiler was serviced in March")
    before = vectors.get_vectors(manager.db, "memory", [memory.id])[memory.id].copy()
    manager.edit(memory.id, statement="I go hiking in the mountains on Sundays")
    after = vectors.get_vectors(manager.db, "memory", [memory.id])[memory.id]
    assert not np.allclose(before, after)
    assert np.allclose(after, manager.embedder.embed(["I go hiking in the mountains on Sundays"])[0], atol=1e-5)
    assert _nearest(manager, "walking trails and peaks") == memory.id


def test_list_and_show(manager):
    pinned = manager.add("I am vegetarian", pinned=True)
    manager.add("The meeting moved to Thursday", kind="episodic")
    trashed = manager.add("Old fact")
    manager.delete(trashed.id)
    assert [m.id for m in manager.list(pinned=True)] == [pinned.id]
    assert [m.id for m in manager.list(status="trashed")] == [trashed.id]
    assert len(manager.list(status=None)) == 3
    assert manager.list(kind="episodic")[0].statement == "The meeting moved to Thursday"


def test_episode_protect_delete_restore(manager, db):
    from core.store.episodes import add_episode, get_episode
    episode = add_episode(db, "We got married in June")
    assert manager.protect_episode(episode).protected
    with pytest.raises(InvalidInput):
        manager.delete_episode(episode)
    manager.unprotect_episode(episode)
    assert manager.delete_episode(episode).deleted_at is not None
    assert manager.restore_episode(episode).deleted_at is None
    manager.delete_episode(episode)
    assert manager.purge().episodes == 1
    with pytest.raises(NotFound):
        get_episode(db, episode)


def test_reembed_rebuilds_every_vector(manager, db):
    from core.memory.index import index_episodes
    from core.store.episodes import add_episode
    first = manager.add("Ana lives in Lisbon")
    manager.add("I drink tea, not coffee")
    index_episodes(db, manager.embedder, [add_episode(db, "hello there")])
    db.execute("DELETE FROM memory_vec WHERE id = ?", (first.id,))  # a hole the rebuild must fill
    assert manager.reembed() == 3
    assert first.id in vectors.get_vectors(db, "memory", [first.id])
    assert _nearest(manager, "beverage preference") == first.id + 1


def test_a_reembed_embeds_before_it_locks_the_store_and_catches_what_changed_meanwhile(manager, db):
    """Embedding a store takes minutes with a big model: it runs before the write, so the chat can go on writing;
    a memory added or edited meanwhile is embedded again inside the (short) write."""
    from core.store.memories import add_memory, update_memory
    first = manager.add("Ana lives in Lisbon").id
    manager.add("I drink tea, not coffee")
    calls = []

    def embed(texts):
        calls.append((len(texts), db.conn.in_transaction))
        if len(calls) == 1:  # while the store is embedded: a turn writes a memory, an edit changes one
            add_memory(db, "The boiler was serviced in March")
            update_memory(db, first, statement="Ana lives in Porto now")
        return manager.embedder.embed(texts)
    assert vectors.reembed(db, manager.embedder.name, manager.embedder.dimension, manager._texts, embed) == 3
    assert calls[0] == (2, False)  # the whole store, outside any transaction
    assert all(size <= 2 for size, _ in calls[1:])  # inside it: only what changed meanwhile
    assert _nearest(manager, "where does Ana live now") == first
    assert _nearest(manager, "heating maintenance") == 3


def test_a_manager_without_an_embedder_still_edits_flags(db):
    plain = MemoryManager(db)
    from core.store.memories import add_memory
    memory_id = add_memory(db, "row without a vector")
    assert plain.pin(memory_id).pinned
    with pytest.raises(ValueError, match="without an embedder"):
        plain.add("needs a vector")


def test_a_reembed_that_fails_half_way_changes_nothing(manager, db):
    manager.add("Ana lives in Lisbon")
    manager.add("I drink tea, not coffee")
    before = vectors.bound_embedder(db), vectors.get_vectors(db, "memory", [1, 2])

    def broken(texts):
        raise RuntimeError("the new model ran out of memory")
    with pytest.raises(RuntimeError, match="out of memory"):
        vectors.reembed(db, "other-model", 8, manager._texts, broken)
    after = vectors.bound_embedder(db), vectors.get_vectors(db, "memory", [1, 2])
    assert after[0] == before[0] and set(after[1]) == {1, 2}
    assert all((after[1][i] == before[1][i]).all() for i in (1, 2))
    assert _nearest(manager, "beverage preference") == 2  # recall works as before


def test_a_reembed_asked_to_stop_stops_within_a_batch_and_changes_nothing(manager, db):
    for i in range(5):
        manager.add(f"Memory number {i} about the garden")
    before = vectors.bound_embedder(db), vectors.get_vectors(db, "memory", range(1, 6))
    batches = []

    def embed(texts):
        batches.append(len(texts))
        return manager.embedder.embed(texts)
    with pytest.raises(WorkStopped, match="nothing was changed"):
        vectors.reembed(db, "other-model", 384, manager._texts, embed, batch=2, stop=lambda: len(batches) >= 1)
    assert batches == [2]  # the quit waited for one batch, not for the store
    after = vectors.bound_embedder(db), vectors.get_vectors(db, "memory", range(1, 6))
    assert after[0] == before[0] and all((after[1][i] == before[1][i]).all() for i in range(1, 6))


def test_adding_a_statement_already_remembered_raises_its_confidence_instead_of_a_copy(manager):
    first = manager.add("Ana lives in Porto", confidence=0.8)
    manager.add("The boiler was serviced in March")
    again = manager.remember("  ana lives in  Porto. ", pinned=True)
    assert again.existed and again.memory.id == first.id
    assert again.memory.confidence == pytest.approx(0.9) and again.memory.pinned  # the flag asked for is applied
    assert manager.db.scalar("SELECT count(*) FROM memories") == 2
    assert [h.action for h in manager.show(first.id).history] == ["create", "update", "pin"]
    assert manager.add("Ana lives in Porto").id == first.id  # add() follows the same rule
    assert manager.get(first.id).confidence == pytest.approx(1.0)  # and never beyond certain
    manager.delete(first.id)
    fresh = manager.remember("Ana lives in Porto")  # a trashed memory is not "remembered": a new row
    assert not fresh.existed and fresh.memory.id != first.id


@pytest.mark.parametrize("said, again, same", [
    ("Ana lives in Porto", "ANA LIVES IN PORTO!", True),
    ("Ana lives\u00a0in Porto", "ana lives in porto", True),  # a no-break space is spacing too
    ("The user's bike is a 2019 Brompton", "the user's bike is a 2019 brompton.", True),
    ("The user's bike is a 2019 Brompton", "The user's bikes are 2019 Bromptons", False),  # same stems, not same
    ("Ana lives in Porto", "Ana lives in Porto now", False),
    ("O João mora em Évora", "o João mora em Évora.", True),  # not ASCII: the whole scan, as before
    ("50% off", "50% OFF", True), ("a_b", "A_B", True), ("...", "...", True)])
def test_the_same_statement_is_found_among_many_others_by_its_words(manager, said, again, same):
    """The row is narrowed by the full-text index, then the same LIKE and comparison decide as before."""
    for n in range(30):
        manager.db.execute("INSERT INTO memories(statement, kind, created_at, updated_at) VALUES (?, 'semantic', "
                           "0, 0)", (f"Ana lives in Porto and owns bike number {n}",))
    first = manager.add(said)
    found = manager.remember(again)
    assert found.existed is same and (found.memory.id == first.id) is same
