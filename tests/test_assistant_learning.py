"""Learning after the reply (issue 17 part 4): a turn is stored as waiting to be learned, learning gives way to a
reply that is being made (`busy`), and a turn left waiting is learned later from the store."""
from __future__ import annotations

from core.assistant import BUSY, pending_learning
from core.store.episodes import get_episode
from core.store.memories import list_memories
from tests.fakes import ScriptedStructuredModel
from tests.test_assistant import fact_reply, make, store  # noqa: F401 - the fixture


def _script() -> ScriptedStructuredModel:
    return ScriptedStructuredModel({
        "engram_facts": [{"facts": [fact_reply("The user plays the cello.", "cello", "plays")]}],
        "reconcile_decision": [{"decision": "new", "target": 0, "reason": "new"}],
        "usefulness_rating": [{"useful": []}]})


def test_a_stored_turn_waits_to_be_learned_until_it_is(db, embedder, clock):
    structured = _script()
    assistant = make(db, embedder, clock, structured)
    reply = assistant.reply(None, "I play the cello every evening", learn=False)
    episode = reply.record.episode_id
    assert pending_learning(db) == [episode]  # stored, not learned yet: nothing is lost
    report = assistant.learn(reply.record)
    assert [o.decision for o in report.outcomes] == ["new"] and pending_learning(db) == []
    assert get_episode(db, episode).metadata["learning"] == "done"


def test_a_busy_machine_skips_learning_and_the_turn_is_learned_later(db, embedder, clock):
    structured = _script()
    assistant = make(db, embedder, clock, structured)
    reply = assistant.reply(None, "I play the cello every evening", learn=False)
    skipped = assistant.learn(reply.record, busy=lambda: True)
    assert skipped.skipped == BUSY and skipped.indexed  # recallable at once, word for word
    assert structured.titles() == [] and list_memories(db) == []
    assert pending_learning(db) == [reply.record.episode_id]
    later = assistant.learn(assistant.stored_turn(reply.record.episode_id))  # what reflection / a quiet chat do
    assert later.skipped == "" and [f.statement for f in later.facts] == ["The user plays the cello."]
    assert pending_learning(db) == []
    assert [m.statement for m in list_memories(db)] == ["The user plays the cello."]


def test_a_reply_wanted_during_extraction_stops_it_and_the_turn_is_learned_later(db, embedder, clock):
    """A weak model on a CPU can take minutes over the facts: the user's next reply must not wait for them."""
    structured = _script()
    assistant = make(db, embedder, clock, structured)
    reply = assistant.reply(None, "I play the cello every evening", learn=False)
    answers = iter([False, True])  # free before extraction, a message arrives while the facts are generated
    report = assistant.learn(reply.record, busy=lambda: next(answers))
    assert report.skipped == BUSY and structured.titles() == ["engram_facts"]
    assert list_memories(db) == [] and pending_learning(db) == [reply.record.episode_id]  # nothing half-learned
    later = assistant.learn(assistant.stored_turn(reply.record.episode_id))
    assert [f.statement for f in later.facts] == ["The user plays the cello."] and pending_learning(db) == []


def test_a_reply_that_starts_after_extraction_skips_only_the_rating(db, embedder, clock, store):
    structured = _script()
    assistant = make(db, embedder, clock, structured)
    reply = assistant.reply(None, "I play the cello every evening in Boston", learn=False)
    assert reply.used_ids  # memories were used: a quiet machine would rate them
    answers = iter([False, False, True])  # free before and through extraction, a message arrives after it
    report = assistant.learn(reply.record, busy=lambda: next(answers))
    assert "engram_facts" in structured.titles() and "usefulness_rating" not in structured.titles()
    assert report.rating_skipped and report.facts
    assert pending_learning(db) == []  # the facts are what mattered: the turn counts as learned


def test_incognito_and_reanswers_never_wait_to_be_learned(db, embedder, clock):
    assistant = make(db, embedder, clock, _script())
    assistant.reply(None, "I play the cello every evening", incognito=True, learn=False)
    first = assistant.reply(None, "I play the viola too", learn=False)
    assistant.learn(first.record)
    again = assistant.prepare(None, "I play the viola too")
    assistant.finish(again, "A new answer", replaces=first.record.episode_id)  # a re-answer: nothing new to learn
    assert pending_learning(db) == []
