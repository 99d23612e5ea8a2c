"""Trying again to learn a turn Engram gave up on (core.store.turn_learning.requeue): the turn waits again with
fresh tries and is learned through the same claim as any other, so two learners still learn it once; a turn
learned already, or one a live learner holds, is not touched."""
from __future__ import annotations

import pytest

from core.assistant import TAKEN, pending_learning
from core.errors import InvalidInput, NotFound
from core.store import turn_learning
from core.store.episodes import get_episode
from tests.fakes import ScriptedStructuredModel
from tests.test_assistant import make
from tests.test_turn_learning import CELLO, NEW, _cello, _out_of_memory

CALLS = "engram_facts"


def _given_up_turn(db, embedder, clock):
    """A stored turn whose learning failed MAX_ATTEMPTS times; and the model that now works."""
    script = {"engram_facts": _out_of_memory}
    assistant = make(db, embedder, clock, ScriptedStructuredModel(script))
    episode = assistant.reply(None, CELLO, learn=False).record.episode_id
    for _ in range(turn_learning.MAX_ATTEMPTS):
        with pytest.raises(RuntimeError):
            assistant.learn(assistant.stored_turn(episode))
    assert [g.episode_id for g in turn_learning.given_up(db)] == [episode]
    return episode


def test_a_given_up_turn_waits_again_with_fresh_tries_and_is_learned_once(db, embedder, clock):
    episode = _given_up_turn(db, embedder, clock)
    assert turn_learning.requeue(db, [episode]) == [episode]
    assert pending_learning(db) == [episode]  # at once: no pause before this try
    assert turn_learning.given_up(db) == [] and get_episode(db, episode).metadata["learning"] == "pending"
    model = ScriptedStructuredModel({"engram_facts": _cello, "reconcile_decision": [NEW]})
    first, second = make(db, embedder, clock, model), make(db, embedder, clock, model)
    report = first.learn(first.stored_turn(episode))
    assert [o.decision for o in report.outcomes] == ["new"]
    assert second.learn(second.stored_turn(episode)).skipped == TAKEN  # the claim path: learned once
    assert model.titles().count(CALLS) == 1
    assert get_episode(db, episode).metadata["learning"] == "done" and pending_learning(db) == []


def test_a_retried_turn_that_fails_again_gets_its_three_tries_again(db, embedder, clock):
    episode = _given_up_turn(db, embedder, clock)
    turn_learning.requeue(db, [episode])
    assistant = make(db, embedder, clock, ScriptedStructuredModel({"engram_facts": _out_of_memory}))
    with pytest.raises(RuntimeError):
        assistant.learn(assistant.stored_turn(episode))
    assert turn_learning.given_up(db) == []  # one try of three: it waits for a later pass
    assert get_episode(db, episode).metadata["learning"] == "pending"


def test_a_turn_waiting_after_a_failure_is_tried_now(db, embedder, clock):
    assistant = make(db, embedder, clock, ScriptedStructuredModel({"engram_facts": _out_of_memory}))
    episode = assistant.reply(None, CELLO, learn=False).record.episode_id
    with pytest.raises(RuntimeError):
        assistant.learn(assistant.stored_turn(episode))
    assert pending_learning(db) == []  # waiting for the idle pass's pause
    assert turn_learning.requeue(db, [episode]) == []  # it was not given up: only the pause goes
    assert pending_learning(db) == [episode]


def test_a_learned_turn_or_one_a_live_learner_holds_is_left_alone(db, embedder, clock):
    model = ScriptedStructuredModel({"engram_facts": _cello, "reconcile_decision": [NEW]})
    assistant = make(db, embedder, clock, model)
    learned = assistant.reply(None, CELLO, learn=False).record.episode_id
    assistant.learn(assistant.stored_turn(learned))
    with pytest.raises(InvalidInput, match="learned already"):
        turn_learning.requeue(db, [learned])
    assert get_episode(db, learned).metadata["learning"] == "done"
    held = assistant.reply(None, "I also play the piano", learn=False).record.episode_id
    claim = turn_learning.claim(db, held, "elsewhere:1:x", alive=lambda _owner: True)
    assert claim is not None
    assert turn_learning.requeue(db, [held]) == []
    assert turn_learning.claim(db, held, "here:2:y", alive=lambda _owner: True) is None  # still theirs


def test_one_bad_turn_among_several_changes_none_of_them(db, embedder, clock):
    episode = _given_up_turn(db, embedder, clock)
    with pytest.raises(NotFound, match="no conversation turn 9999"):
        turn_learning.requeue(db, [episode, 9999])
    assert [g.episode_id for g in turn_learning.given_up(db)] == [episode]  # still given up
