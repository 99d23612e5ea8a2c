"""A stored turn is learned once through the real MLX engine (the tiny model, structured output) while a second
learner on its own connection and thread — the idle job beside the chat — asks for the same turn mid-extraction."""
from __future__ import annotations

import threading

from core.assistant import TAKEN, Assistant, pending_learning
from core.config import GenerationSettings, Settings
from core.store.db import open_db
from core.store.episodes import get_episode
from models.structured import StructuredGenerator

SETTINGS = Settings(generation=GenerationSettings(max_tokens=16, context_tokens=2048, engram_max_facts=2))


class Counting:
    """The real structured generator, its calls counted."""

    def __init__(self, real: StructuredGenerator) -> None:
        self.real, self.calls = real, 0

    def generate_json(self, messages, schema, *, max_tokens=512, stop=None):
        self.calls += 1
        return self.real.generate_json(messages, schema, max_tokens=max_tokens, stop=stop)


class SecondLearnerMidway(Counting):
    """At the first call (the chat's learner is extracting), a second learner on another connection and thread
    asks for the same turn; that thread is waited for, then the real generator answers."""

    def __init__(self, real: StructuredGenerator, second: Assistant, episode: int) -> None:
        super().__init__(real)
        self.second, self.episode, self.second_report = second, episode, None

    def generate_json(self, messages, schema, *, max_tokens=512, stop=None):
        if self.calls == 0:
            def learn() -> None:
                self.second_report = self.second.learn(self.second.stored_turn(self.episode))
            thread = threading.Thread(target=learn)
            thread.start()
            thread.join(60)
        return super().generate_json(messages, schema, max_tokens=max_tokens)


def test_two_learners_on_two_connections_learn_a_turn_once_with_the_tiny_model(tmp_path, clock, embedder,
                                                                               tiny_engine):
    chat_db, job_db = (open_db(tmp_path / "engram.db", clock=clock) for _ in range(2))
    real = StructuredGenerator(tiny_engine, temperature=1.0, seed=7)
    chatting = Assistant(chat_db, embedder, tiny_engine, None, SETTINGS, clock)
    episode = chatting.reply(None, "My sister Ana lives in Porto", learn=False).record.episode_id
    second_model = Counting(real)
    idle_job = Assistant(job_db, embedder, None, second_model, SETTINGS, clock)
    spy = SecondLearnerMidway(real, idle_job, episode)
    learner = Assistant(chat_db, embedder, tiny_engine, spy, SETTINGS, clock)
    report = learner.learn(learner.stored_turn(episode))
    assert spy.second_report is not None and spy.second_report.skipped == TAKEN and second_model.calls == 0
    assert report.skipped == "" and spy.calls >= 1
    assert pending_learning(job_db) == [] and get_episode(job_db, episode).metadata["learning"] == "done"
    for database in (chat_db, job_db):
        database.close()


def test_reconciling_a_fact_through_the_tiny_model_stops_between_tokens_with_nothing_written(db, embedder,
                                                                                           tiny_engine):
    """Reconciliation's model call gives way to a reply as extraction's does: a stop asked between tokens ends it
    with GenerationStopped and the store as it was; let run, the same call decides."""
    import pytest

    from core.errors import GenerationStopped
    from core.memory.engram import Fact
    from core.memory.index import index_memories
    from core.memory.reconcile import reconcile_fact
    from core.store.memories import add_memory, count_memories
    boston = add_memory(db, "The user lives in Boston.", subject="user", relation="lives_in", object="Boston")
    index_memories(db, embedder, [boston])
    real = StructuredGenerator(tiny_engine, temperature=1.0, seed=7)
    denver = Fact("user", "lives_in", "Denver", "The user lives in Denver.", 0.9)
    asked = []

    def reply_waiting() -> bool:  # a message arrives after a few tokens
        asked.append(1)
        return len(asked) > 3
    with pytest.raises(GenerationStopped):
        reconcile_fact(db, embedder, real, denver, None, SETTINGS, stop=reply_waiting)
    assert len(asked) > 3 and count_memories(db) == 1
    outcome = reconcile_fact(db, embedder, real, denver, None, SETTINGS, stop=lambda: False)
    assert outcome.decision in ("new", "duplicate", "update", "contradiction")
