"""A Services on a temporary folder builds the real scheduler: its four job kinds run their real handlers
(reflection and consolidation through the tiny MLX model, forgetting, and the fine-tune job's first step)."""
from __future__ import annotations

import time

import pytest

from app.services.scheduling import KINDS, plan, queue_reflection
from app.services.wiring import Services
from core.assistant import Assistant, pending_learning
from core.memory.index import index_episodes, index_memories
from core.store import jobs as store
from core.protocols import SamplingParams
from core.store.episodes import add_episode, get_episode
from core.store.memories import add_memory, get_memory
from core.store.sessions import create_session, end_session, get_session

DAY = 86400.0


@pytest.fixture
def services(tmp_path, tiny_engine, tiny_model_dir, embedder):
    svc = Services.from_data_dir(tmp_path / "home")
    svc.settings = svc.settings.replace(chat_model=str(tiny_model_dir))
    svc.chat, svc._embedder = tiny_engine, embedder  # the loaded tiny model and MiniLM, handed in
    yield svc
    svc.close()


def test_the_four_job_kinds_run_their_real_handlers(services):
    db = services.db
    now = time.time()
    session = create_session(db, "garden", created_at=now - 3 * 3600)
    turns = [add_episode(db, text, "Nice.", session_id=session, created_at=now - 2 * 3600)
             for text in ("My tomatoes are ripening", "The garden tomatoes need water", "I grow tomatoes")]
    end_session(db, session)
    old = add_memory(db, "The user once owned a typewriter.", confidence=0.5, created_at=now - 400 * DAY)
    index_episodes(db, services.embedder, turns)
    index_memories(db, services.embedder, [old])

    scheduler = services.scheduler()
    assert set(scheduler.specs) == set(KINDS)
    finished = {}
    for kind in KINDS:
        job = queue_reflection(scheduler, session) if kind == "reflection" else scheduler.enqueue(kind)
        store.request(db, job.id, "resume")  # as `engram jobs run`: skip the idle conditions
        finished[kind] = scheduler.run_job(job.id)
    for kind, job in finished.items():
        assert job is not None and job.state == "done", (kind, job and job.last_error)
    assert get_session(db, session).reflected_at is not None
    assert db.scalar("SELECT count(*) FROM episodes WHERE summary_id IS NOT NULL") == 3
    assert get_memory(db, old).status == "forgotten"
    assert "no fine-tune: not enough to learn how you like answers yet" in finished["finetune"].message  # facts: none


def test_plan_queues_routine_jobs_and_pending_reflections(services):
    db = services.db
    session = create_session(db)
    add_episode(db, "hello", session_id=session)
    end_session(db, session)
    scheduler = services.scheduler()
    kinds = sorted(job.kind for job in plan(scheduler, services.settings))
    assert kinds == ["consolidation", "forgetting", "reflection"]  # nothing to fine-tune on yet (issue 42)
    assert plan(scheduler, services.settings) == []  # nothing twice
    add_episode(db, "Use metric units from now on.", "Will do.")  # a standing instruction: four demonstrations
    assert [job.kind for job in plan(scheduler, services.settings)] == ["finetune"]


def test_the_reflection_job_learns_a_turn_the_chat_left_waiting_with_the_tiny_model(services):
    """A turn stored while the chat was busy is learned by the idle-time job (the chat model's structured output),
    then no longer waits; a job is planned for it though no conversation has ended."""
    db = services.db
    assistant = Assistant(db, services.embedder, services.chat, None, services.settings)
    reply = assistant.reply(None, "My sister Ana lives in Porto", learn=False, sampling=SamplingParams(max_tokens=8))
    episode = reply.record.episode_id
    assert pending_learning(db) == [episode]
    scheduler = services.scheduler()
    (job,) = [j for j in plan(scheduler, services.settings) if j.kind == "reflection"]
    store.request(db, job.id, "resume")  # skip the idle conditions, as `engram jobs run` does
    finished = scheduler.run_job(job.id)
    assert finished.state == "done", finished.last_error
    assert pending_learning(db) == [] and get_episode(db, episode).metadata["learning"] == "done"
    assert finished.message.startswith("learned 1 turn the chat left for later (")
