"""`engram chat`'s learning thread (app.cli.chat_learning.BackgroundLearner) when a turn's learning raises: the
line before the next prompt says whether Engram will try again later or has stopped trying — and then which
command tries again. A real store on the thread's own connection; the model that fails is scripted."""
from __future__ import annotations

import pytest

from app.cli.chat_learning import BackgroundLearner
from core.store import turn_learning
from core.store.db import open_db
from tests.fakes import ScriptedStructuredModel
from tests.test_assistant import make
from tests.test_turn_learning import CELLO, _out_of_memory


def _chat_learner(db, embedder, clock):
    """A BackgroundLearner whose thread learns on a connection of its own, with a model that always fails."""
    failing = ScriptedStructuredModel({"engram_facts": _out_of_memory})
    return BackgroundLearner(lambda: make(open_db(db.path, clock=clock), embedder, clock, failing))


def _notes_after(learner) -> list[str]:
    learner.close()
    return learner.take_notes()


def test_a_first_failure_says_engram_will_try_again_later(db, embedder, clock):
    assistant = make(db, embedder, clock)
    record = assistant.reply(None, CELLO, learn=False).record
    learner = _chat_learner(db, embedder, clock)
    learner.add(record)
    [note] = _notes_after(learner)
    assert note.startswith("  [from 'I play the cello every evening': could not be learned, tried again later")
    assert "Insufficient Memory" in note and "relearn" not in note


def test_the_last_failure_says_engram_stopped_trying_and_how_to_try_again(db, embedder, clock):
    failing = make(db, embedder, clock, ScriptedStructuredModel({"engram_facts": _out_of_memory}))
    record = failing.reply(None, CELLO, learn=False).record
    for _ in range(turn_learning.MAX_ATTEMPTS - 1):  # two tries failed already (the idle pass, say)
        with pytest.raises(RuntimeError):
            failing.learn(failing.stored_turn(record.episode_id))
    learner = _chat_learner(db, embedder, clock)
    learner.add(record)
    [note] = _notes_after(learner)
    assert f"Engram stopped trying after {turn_learning.MAX_ATTEMPTS} tries" in note
    assert note.endswith(f"`engram relearn {record.episode_id}` tries again]")
    assert [g.episode_id for g in turn_learning.given_up(db)] == [record.episode_id]
