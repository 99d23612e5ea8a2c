"""Which memories an import alone brought (core.importers.batches): found from the batch's own turns, the same ones
as asking every memory of the store about its sources."""
from __future__ import annotations

from core.importers.batches import _memories_only_from, list_batches, undo_batch
from core.store.episodes import add_episode
from core.store.memories import add_memory, get_memory, set_flag
from core.store.sessions import create_session


def imported(db, text: str, batch: str) -> int:
    session = create_session(db, "imported")
    return add_episode(db, text, "noted", session_id=session,
                       metadata={"imported": {"batch": batch, "from": "chatgpt", "label": "imported"}})


def test_only_the_memories_every_source_of_which_is_in_the_batch_and_not_pinned_or_protected(db):
    a1, a2 = imported(db, "I keep bees", "a"), imported(db, "I sail on Sundays", "a")
    b1 = imported(db, "I live in Porto", "b")
    own = add_episode(db, "I keep bees, yes")
    only_a = add_memory(db, "The user keeps bees", source_episode_ids=[a1])
    both_a = add_memory(db, "The user sails", source_episode_ids=[a1, a2])
    a_and_own = add_memory(db, "The user is a beekeeper", source_episode_ids=[a2, own])
    a_and_b = add_memory(db, "The user sails near Porto", source_episode_ids=[a2, b1])
    pinned = add_memory(db, "The user's bees are Italian", source_episode_ids=[a1])
    protected = add_memory(db, "The user's boat is blue", source_episode_ids=[a2])
    unsourced = add_memory(db, "The user likes tea")
    set_flag(db, pinned, "pinned", True)
    set_flag(db, protected, "protected", True)
    assert _memories_only_from(db, "a") == [only_a, both_a]
    assert _memories_only_from(db, "b") == []
    assert _memories_only_from(db, "nothing") == []
    assert {b.batch: b.memories for b in list_batches(db)} == {"a": 2, "b": 0}
    assert undo_batch(db, "a") == (2, 2, 2)
    kept = [a_and_own, a_and_b, pinned, protected, unsourced]
    assert [get_memory(db, m).deleted_at is None for m in [only_a, both_a, *kept]] == [False, False] + [True] * 5
