"""Per-reply attribution (table reply_memories): order, re-answers keep vetoes, purge leaves nothing behind."""
from __future__ import annotations

from core.store import turns
from core.store.episodes import add_episode, get_episode
from core.store.memories import add_memory, purge_memory_rows, trash_memory


def test_used_memories_keep_their_context_order_and_a_reanswer_keeps_vetoes(db, clock):
    a, b, c = (add_memory(db, f"fact {n}") for n in "abc")
    episode = add_episode(db, "question", "answer")
    turns.record_used(db, episode, [(b, 0.9, True), (a, 0.5, False), (c, 0.4, False)])
    assert turns.used_memory_ids(db, episode) == [b, a, c]
    turns.set_useful(db, episode, [b, a, c], [a])
    assert [r["useful"] for r in turns.used_rows(db, episode)] == [0, 1, 0]
    turns.mark_vetoed(db, episode, c, clock.now)
    turns.record_used(db, episode, [(a, 0.7, False)])  # the re-answer without c (and, this time, without b)
    assert turns.used_memory_ids(db, episode) == [a]
    assert turns.used_memory_ids(db, episode, include_vetoed=True) == [a, c]
    assert turns.used_rows(db, episode)[0]["useful"] is None  # a new answer is rated afresh


def test_replies_using_a_memory_and_purge_cascades(db):
    memory = add_memory(db, "The user likes tea.")
    first, second = add_episode(db, "q1", "a1"), add_episode(db, "q2", "a2")
    for episode in (first, second):
        turns.record_used(db, episode, [(memory, 0.5, False)])
    assert turns.replies_using(db, memory) == [second, first]
    trash_memory(db, memory)
    purge_memory_rows(db, [memory])
    assert db.scalar("SELECT count(*) FROM reply_memories") == 0


def test_a_reanswer_replaces_the_reply_and_counts_itself(db):
    episode = add_episode(db, "question", "first answer")
    turns.replace_reply(db, episode, "second answer", "stop")
    turns.replace_reply(db, episode, "third answer", "cancelled", rejected=True)
    stored = get_episode(db, episode)
    assert stored.assistant_text == "third answer"
    # the earlier answers stay one click away (Regenerate's ‹ ›); the one the user regenerated away is the
    # rejected side of a preference pair for the fine-tune
    assert stored.metadata == {"finish_reason": "cancelled", "reanswered": 2,
                               "earlier_replies": ["first answer", "second answer"],
                               "rejected_replies": ["second answer"]}
    found = db.scalar("SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH 'third'")
    assert found == episode and db.scalar("SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH 'first'") == 0
