"""Learning after the reply (issue 17 part 4): a turn is stored as waiting to be learned, learning gives way to a
reply that is being made (`busy`), and a turn left waiting is learned later from the store."""
from __future__ import annotations

from core.assistant import BUSY, pending_learning
from core.store.episodes import get_episode
from core.store.memories import list_memories
from tests.fakes import ScriptedStructuredModel
from tests.test_assistant import fact_reply, make, store_fixture  # noqa: F401 - the fixture


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
    answers = iter([False, False, False, True])  # free before and through extraction and reconciliation, a message
    # arrives after them
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


def test_a_reply_wanted_between_two_facts_stops_learning_and_nothing_is_learned_twice(db, embedder, clock):
    """Reconciling a fact is a model call of its own: the next reply waits for none of them. The facts already
    reconciled stay; when the turn is learned again they are neither added again nor made surer."""
    from core.memory.index import index_memories
    from core.store.memories import add_memory
    piano = add_memory(db, "The user plays the piano.", subject="user", relation="plays", object="piano",
                       confidence=0.8)
    chicago = add_memory(db, "The user lives in Chicago.", subject="user", relation="lives_in", object="Chicago",
                         confidence=0.8)  # each new fact has a related one stored: each reconcile asks the model
    index_memories(db, embedder, [piano, chicago])
    structured = ScriptedStructuredModel({
        "engram_facts": [{"facts": [fact_reply("The user plays the cello.", "cello", "plays"),
                                    fact_reply("The user lives in Boston.", "Boston", "lives in")]}],
        "reconcile_decision": [{"decision": "new", "target": 0, "reason": "another instrument"}],
        "usefulness_rating": [{"useful": []}]})
    assistant = make(db, embedder, clock, structured)
    reply = assistant.reply(None, "I play the cello and I live in Boston near the river", learn=False)  # "near the
    # river" is left unread by the plain patterns: the model is asked (core.memory.unread)
    structured.calls.clear()
    answers = iter([False, False, False, True])  # a message arrives while the second fact is reconciled
    report = assistant.learn(reply.record, busy=lambda: next(answers, True))
    assert report.skipped == BUSY and structured.titles() == ["engram_facts", "reconcile_decision",
                                                              "reconcile_decision"]
    assert pending_learning(db) == [reply.record.episode_id]
    cello = [m for m in list_memories(db) if "cello" in m.statement]
    assert len(cello) == 1
    later = assistant.learn(assistant.stored_turn(reply.record.episode_id))
    assert later.skipped == "" and pending_learning(db) == []
    statements = sorted(m.statement for m in list_memories(db))
    assert statements == ["The user lives in Boston.", "The user lives in Chicago.", "The user plays the cello.",
                          "The user plays the piano."]
    again = next(m for m in list_memories(db) if "cello" in m.statement)
    assert (again.id, again.confidence) == (cello[0].id, cello[0].confidence)
