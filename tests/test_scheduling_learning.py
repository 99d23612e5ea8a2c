"""The reflection idle job first learns the chat turns left waiting (skipped while the user was busy, or the app
quit first), in batches, giving way when the user comes back and resuming where it stopped. Real store, real
embedder, real scheduler and handler; the structured model is scripted (the job's logic is tested here; the
tiny MLX model runs the same job in tests/integration/test_scheduling.py)."""
from __future__ import annotations

import time

import pytest

from app.services.scheduling import plan
from core.assistant import Assistant, pending_learning
from core.scheduler import Environment
from core.store import jobs as store
from core.store.memories import list_memories
from tests.fakes import ScriptedChatModel, ScriptedStructuredModel
from tests.test_cli_learning import ScriptedServices
from tests.test_assistant import fact_reply

AWAY = 3600.0  # seconds the user has been away: past the scheduler's idle minutes
INSTRUMENTS = ("cello", "violin", "oboe")


@pytest.fixture(name="services")  # imported as services_fixture where shared
def services_fixture(tmp_path, embedder):
    svc = ScriptedServices.from_data_dir(tmp_path / "home")
    svc.settings = svc.settings.replace(chat_model="scripted")  # a model is chosen: model jobs may be planned
    svc._embedder = embedder
    yield svc
    svc.close()


def _facts_for(user: dict, come_back_after: int | None = None):
    """An extraction responder: one fact per turn, named after the instrument in it; the user comes back (idle
    0) during extraction number `come_back_after`."""
    calls = {"n": 0}

    def extract(messages, schema):
        calls["n"] += 1
        if calls["n"] == come_back_after:
            user["idle"] = 0.0
        name = next(i for i in INSTRUMENTS if i in messages[-1].content)
        return {"facts": [fact_reply(f"The user plays the {name}.", name, "plays")]}
    return extract


def _store_waiting_turns(services, count: int) -> list[int]:
    """Turns the chat stored but did not learn from: replies made with learn=False, as a busy chat leaves them."""
    assistant = Assistant(services.db, services.embedder, ScriptedChatModel(["Lovely."]), None, services.settings)
    return [assistant.reply(None, f"I play the {name} on Sundays", learn=False).record.episode_id
            for name in INSTRUMENTS[:count]]


def _scheduler(services, user: dict):
    env = Environment(clock=time.time, idle_seconds=lambda: user["idle"])
    return services.scheduler(env=env)


def _reflection(scheduler, services):
    (job,) = [j for j in plan(scheduler, services.settings) if j.kind == "reflection"]
    return job


def test_the_reflection_job_learns_a_turn_the_chat_left_waiting(services):
    user = {"idle": AWAY}
    services.model = ScriptedStructuredModel({"engram_facts": _facts_for(user),
                                              "reconcile_decision": [{"decision": "new", "target": 0,
                                                                      "reason": "new"}]})
    (episode,) = _store_waiting_turns(services, 1)
    assert pending_learning(services.db) == [episode]
    scheduler = _scheduler(services, user)
    job = _reflection(scheduler, services)  # queued for the waiting turn alone: no conversation has ended
    finished = scheduler.run_job(job.id)
    assert finished.state == "done", finished.last_error
    assert pending_learning(services.db) == []
    assert [m.statement for m in list_memories(services.db)] == ["The user plays the cello."]
    assert finished.message == ("learned 1 turn the chat left for later (1 fact kept); reflected on 0 "
                                "conversations")


def test_a_returning_user_stops_the_batch_and_the_job_resumes_where_it_stopped(services):
    user = {"idle": AWAY}
    services.model = ScriptedStructuredModel({"engram_facts": _facts_for(user, come_back_after=1),
                                              "reconcile_decision": [{"decision": "new", "target": 0,
                                                                      "reason": "new"}]})
    first, *rest = _store_waiting_turns(services, 3)
    scheduler = _scheduler(services, user)
    job = scheduler.enqueue("reflection")  # the only job: run_next below is the scheduler's own choice
    stopped = scheduler.run_next()  # the user comes back while the first turn's facts are extracted
    assert stopped.id == job.id and stopped.state == "queued" and stopped.message == "stopped: user is active"
    assert pending_learning(services.db) == rest  # the first is learned, the others wait, in order
    assert store.get_job(services.db, job.id).checkpoint["learned"] == 1
    assert services.model.titles().count("engram_facts") == 1  # the second turn's extraction never started
    assert scheduler.next_runnable() is None  # not while the user is here

    user["idle"] = AWAY  # away again: the same job picks up the two turns still waiting
    resumed = scheduler.run_next()
    assert resumed.id == job.id and resumed.state == "done", resumed.last_error
    assert pending_learning(services.db) == []
    assert sorted(m.statement for m in list_memories(services.db)) == [
        "The user plays the cello.", "The user plays the oboe.", "The user plays the violin."]
    assert resumed.message.startswith("learned 3 turns the chat left for later (3 facts kept)")


def test_the_progress_message_counts_turns_in_plain_words(services, monkeypatch):
    user = {"idle": AWAY}
    services.model = ScriptedStructuredModel({"engram_facts": _facts_for(user),
                                              "reconcile_decision": [{"decision": "new", "target": 0,
                                                                      "reason": "new"}]})
    _store_waiting_turns(services, 2)
    scheduler = _scheduler(services, user)
    job = _reflection(scheduler, services)
    messages = []
    real = store.heartbeat

    def heard(db, job_id, **kwargs):
        messages.append(kwargs.get("message"))
        return real(db, job_id, **kwargs)
    monkeypatch.setattr(store, "heartbeat", heard)  # every progress line the job reports, as the Jobs panel reads it
    assert scheduler.run_job(job.id).state == "done"
    assert "learned 2 of 2 turns the chat left for later: 2 facts kept, 0 left out" in messages
