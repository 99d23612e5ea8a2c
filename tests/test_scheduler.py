"""The idle-time scheduler with an injected clock and idle source: conditions, yielding, heavy exclusivity."""
from __future__ import annotations

import threading
import time

import pytest

from core.conditions import LEARNING, ActivityTracker, ModelGate
from core.config import SchedulerSettings
from core.errors import GenerationStopped, InvalidInput
from core.jobs import ROUTINE_INTERVALS, Step, standard_specs, stepwise
from core.scheduler import YIELDED, Environment, JobSpec, Scheduler
from core.store import jobs as store
from core.store.db import open_db

IDLE = 11 * 60.0  # past the default 10-minute idle threshold


class World:
    """The injected environment: idle seconds, power and chat are plain attributes a test sets."""

    def __init__(self, clock):
        self.clock = clock
        self.idle = IDLE
        self.power = True
        self.gate = ModelGate()

    def env(self):
        return Environment(clock=self.clock, idle_seconds=lambda: self.idle, on_ac_power=lambda: self.power,
                           localtime=time.gmtime, model_gate=self.gate)


def counting_step(total, log, on_step=None):
    def step(payload, state):
        i = int(state.get("i", 0)) + 1
        log.append(i)
        if on_step:
            on_step(i)
        return Step(state={"i": i}, fraction=i / total, message=f"batch {i}", done=i >= total)
    return step


@pytest.fixture
def world(clock):
    clock.now = 1_700_000_000.0 - (1_700_000_000.0 % 86400) + 12 * 3600  # 12:00 UTC
    return World(clock)


def make(db, world, specs, **settings):
    return Scheduler(db, specs, settings=SchedulerSettings(**settings), env=world.env())


def test_a_job_waits_for_the_user_to_be_idle(db, world):
    log = []
    sched = make(db, world, [JobSpec("work", stepwise(counting_step(3, log)))])
    job = sched.enqueue("work")
    world.idle = 60.0
    assert sched.waiting_reason(store.get_job(db, job.id)) == "user is active"
    assert sched.run_next() is None and log == []
    world.idle = IDLE
    done = sched.run_next()
    assert done.state == "done" and done.progress == 1.0 and log == [1, 2, 3]
    assert done.checkpoint == {"i": 3} and done.attempts == 1


def test_run_now_bypasses_idle_and_quiet_hours(db, world):
    log = []
    sched = make(db, world, [JobSpec("tune", stepwise(counting_step(2, log)), heavy=True, quiet_hours_only=True)])
    world.idle = 0.0
    job = sched.enqueue("tune", run_now=True)
    assert sched.run_next().state == "done" and log == [1, 2]
    assert store.get_job(db, job.id).run_now is False


def test_heavy_jobs_wait_for_ac_power_unknown_counts_as_power(db, world):
    log = []
    sched = make(db, world, [JobSpec("heavy", stepwise(counting_step(1, log)), heavy=True)])
    job = sched.enqueue("heavy")
    world.power = False
    assert sched.waiting_reason(store.get_job(db, job.id)) == "on battery"
    assert sched.run_next() is None
    world.power = None
    assert sched.run_next().state == "done"


def test_light_jobs_run_on_battery(db, world):
    sched = make(db, world, [JobSpec("light", stepwise(counting_step(1, [])))])
    sched.enqueue("light")
    world.power = False
    assert sched.run_next().state == "done"


def test_fine_tuning_waits_for_quiet_hours(db, world, clock):
    sched = make(db, world, standard_specs(finetune=stepwise(counting_step(1, []))))
    job = sched.enqueue("finetune")
    assert sched.waiting_reason(store.get_job(db, job.id)) == "outside quiet hours"
    assert sched.run_next() is None
    clock.advance(14 * 3600)  # 02:00 UTC, inside the default 01:00-06:00
    assert sched.run_next().state == "done"


def test_quiet_hours_end_makes_a_fine_tune_yield(db, world, clock):
    clock.advance(14 * 3600 + 3600 * 3.5)  # 05:30
    log = []
    sched = make(db, world, [JobSpec("tune", stepwise(counting_step(10, log, lambda i: clock.advance(600))),
                                     heavy=True, quiet_hours_only=True)])
    job = sched.enqueue("tune")
    after = sched.run_next()
    assert after.state == "queued" and after.checkpoint["i"] == len(log) < 10
    assert "quiet hours" in after.message
    assert store.get_job(db, job.id).state == "queued"


def test_a_running_job_yields_when_the_user_returns_and_resumes_later(db, world):
    log = []

    def user_returns(i):
        if i == 3:
            world.idle = 0.0
    sched = make(db, world, [JobSpec("consolidate", stepwise(counting_step(6, log, user_returns)), heavy=True)])
    job = sched.enqueue("consolidate")
    paused = sched.run_next()
    assert paused.state == "queued" and paused.checkpoint == {"i": 3} and 0 < paused.progress < 1
    assert sched.run_next() is None  # still active
    world.idle = IDLE
    finished = sched.run_next()
    assert finished.state == "done" and log == [1, 2, 3, 4, 5, 6] and finished.attempts == 2
    assert store.get_job(db, job.id).state == "done"


def test_a_model_generation_that_gives_way_mid_batch_yields_and_the_batch_is_done_again(db, world):
    """A reflection batch whose model answer was stopped for a returning user wrote nothing: it is redone."""
    log, stopped = [], []

    def step(payload, state):
        i = int(state.get("i", 0)) + 1
        if i == 2 and not stopped:
            stopped.append(i)
            raise GenerationStopped("a reply wants the model")
        log.append(i)
        return Step(state={"i": i}, fraction=i / 3, message=f"batch {i}", done=i >= 3)
    sched = make(db, world, [JobSpec("reflection", stepwise(step), heavy=True)])
    sched.enqueue("reflection")
    yielded = sched.run_next()
    assert yielded.state == "queued" and yielded.checkpoint == {"i": 1} and log == [1]
    finished = sched.run_next()
    assert finished.state == "done" and log == [1, 2, 3] and finished.attempts == 2  # a yield, not a failure


def test_chat_has_the_model_first(db, world):
    log = []

    def chat_starts(i):
        if i == 2:
            world.gate.chat_started()
    sched = make(db, world, [JobSpec("reflect", stepwise(counting_step(4, log, chat_starts)), uses_model=True),
                             JobSpec("forget", stepwise(counting_step(1, [])))])
    sched.enqueue("reflect", run_now=True)  # even a run-now job gives way to chat
    after = sched.run_next()
    assert after.state == "queued" and after.message == "stopped: chat is using the model"
    forget = sched.enqueue("forget")
    assert sched.run_next().id == forget.id  # jobs that don't need the model still run
    assert sched.run_next() is None
    with world.gate.chat_turn():
        assert world.gate.chat_active()
    world.gate.chat_finished()
    assert not world.gate.chat_active()
    assert sched.run_next().state == "done" and log == [1, 2, 3, 4]


def test_a_job_waiting_for_chat_says_whether_it_replies_or_learns(db, world):
    sched = make(db, world, [JobSpec("reflect", stepwise(counting_step(1, [])), uses_model=True)])
    job = store.get_job(db, sched.enqueue("reflect").id)
    world.gate.chat_started(LEARNING)
    assert sched.waiting_reason(job) == "learning from your messages"
    world.gate.chat_started()  # a message arrives while it learns: the reply is what holds the model now
    assert sched.waiting_reason(job) == "chat is using the model"
    world.gate.chat_finished()
    assert world.gate.busy_with() == LEARNING
    world.gate.chat_finished(LEARNING)
    assert world.gate.busy_with() is None and sched.waiting_reason(job) is None


def test_never_two_heavy_jobs_at_once_even_across_processes(tmp_path, world):
    db_a = open_db(tmp_path / "e.db", clock=world.clock)
    db_b = open_db(tmp_path / "e.db", clock=world.clock)
    seen = []

    def step_a(payload, state):
        # While A's heavy job runs, another process (B, its own connection) tries to run heavy work.
        seen.append(b.run_next())
        seen.append(b.waiting_reason(store.get_job(db_b, second.id)))
        return Step(state={}, fraction=1.0, done=True)
    a = make(db_a, world, [JobSpec("tune", stepwise(step_a), heavy=True)])
    b = make(db_b, world, [JobSpec("tune", stepwise(counting_step(1, [])), heavy=True),
                           JobSpec("light", stepwise(counting_step(1, [])))])
    first = a.enqueue("tune", payload={"n": 1})
    second = b.enqueue("tune", payload={"n": 2}, run_now=True)  # run now still waits for the heavy one
    light = b.enqueue("light")
    assert a.run_job(first.id).state == "done"
    assert seen[0] is not None and seen[0].id == light.id  # B ran only the light job meanwhile
    assert seen[1] == "another heavy job is running"
    assert b.run_next().id == second.id
    db_a.close()
    db_b.close()


def test_claim_refuses_a_second_heavy_job(db, world):
    sched = make(db, world, [JobSpec("tune", stepwise(counting_step(1, [])), heavy=True)])
    one = sched.enqueue("tune", payload={"n": 1})
    two = sched.enqueue("tune", payload={"n": 2})
    assert store.claim(db, one.id, "x", heavy_kinds=["tune"]) is not None
    assert store.claim(db, two.id, "y", heavy_kinds=["tune"]) is None
    assert store.claim(db, one.id, "y") is None  # already running


def test_pause_cancel_and_resume(db, world):
    log = []
    pause_at_two = counting_step(5, log, lambda i: i == 2 and sched.pause(job.id))
    sched = make(db, world, [JobSpec("work", stepwise(pause_at_two))])
    job = sched.enqueue("work")
    paused = sched.run_next()
    assert paused.state == "paused" and paused.checkpoint == {"i": 2}
    assert sched.run_next() is None
    resumed = sched.resume(job.id)
    assert resumed.state == "queued" and resumed.run_now
    world.idle = 0.0
    assert sched.run_next().state == "done" and log == [1, 2, 3, 4, 5]
    other = sched.enqueue("work", payload={"x": 1})
    assert sched.cancel(other.id).state == "cancelled"
    with pytest.raises(InvalidInput):
        sched.cancel(other.id)


def test_cancel_while_running(db, world):
    sched = make(db, world, [JobSpec("work", stepwise(counting_step(5, [], lambda i: sched.cancel(job.id))))])
    job = sched.enqueue("work")
    assert sched.run_next().state == "cancelled"


def test_a_failing_job_retries_then_fails_with_its_error(db, world, clock):
    def broken(ctx):
        raise RuntimeError("disk on fire")
    sched = make(db, world, [JobSpec("bad", broken, max_attempts=2, retry_after_seconds=60)])
    job = sched.enqueue("bad")
    first = sched.run_next()
    assert first.state == "queued" and "disk on fire" in first.last_error and first.not_before == clock() + 60
    assert sched.run_next() is None  # backing off
    clock.advance(61)
    final = sched.run_next()
    assert final.state == "failed" and final.attempts == 2 and "RuntimeError" in final.last_error
    assert store.get_job(db, job.id).finished_at == clock()


def test_a_handler_can_yield_by_raising(db, world):
    def handler(ctx):
        world.idle = 0.0
        if ctx.should_yield():
            ctx.yield_now({"where": "middle"})
    sched = make(db, world, [JobSpec("h", handler)])
    sched.enqueue("h")
    after = sched.run_next()
    assert after.state == "queued" and after.checkpoint == {"where": "middle"}


def test_enqueue_dedupes_open_jobs_and_rejects_unknown_kinds(db, world):
    sched = make(db, world, [JobSpec("w", stepwise(counting_step(1, [])))])
    a = sched.enqueue("w", payload={"session_id": 4})
    assert sched.enqueue("w", payload={"session_id": 4}).id == a.id
    assert sched.enqueue("w", payload={"session_id": 4}, run_now=True).run_now
    assert sched.enqueue("w", payload={"session_id": 5}).id != a.id
    with pytest.raises(InvalidInput):
        sched.enqueue("nope")
    with pytest.raises(InvalidInput):
        store.save_checkpoint(db, a.id, {"bad": object()})
    with pytest.raises(InvalidInput):
        store.list_jobs(db, states=["sleeping"])


def test_plan_routine_queues_each_kind_once_per_interval(db, world, clock):
    handler = stepwise(counting_step(1, []))
    sched = make(db, world, standard_specs(consolidate=handler, forget=handler))
    kinds = sorted(j.kind for j in sched.plan_routine(ROUTINE_INTERVALS))
    assert kinds == ["consolidation", "forgetting"]
    assert sched.plan_routine(ROUTINE_INTERVALS) == []  # already queued
    while sched.run_next():
        pass
    assert sched.plan_routine(ROUTINE_INTERVALS) == []  # ran just now
    clock.advance(days=1.01)
    assert len(sched.plan_routine(ROUTINE_INTERVALS)) == 2


def test_background_loop_yields_within_seconds_when_activity_returns(db):
    """Real time and a real thread: the app's own input activity stops a running job promptly."""
    activity = ActivityTracker(clock=time.monotonic)
    started = threading.Event()

    def slow_step(payload, state):
        started.set()
        time.sleep(0.02)
        return Step(state={"i": state.get("i", 0) + 1}, fraction=0.0)  # never finishes on its own
    env = Environment(clock=time.time, idle_seconds=activity.idle_seconds, on_ac_power=lambda: None)
    sched = Scheduler(db, [JobSpec("loop", stepwise(slow_step))], settings=SchedulerSettings(idle_minutes=0.001),
                      env=env)
    job = sched.enqueue("loop")
    time.sleep(0.1)  # idle for longer than 0.06 s
    thread = threading.Thread(target=sched.run_forever, kwargs={"poll_seconds": 0.05}, daemon=True)
    thread.start()
    assert started.wait(5)
    activity.touch()
    t0 = time.monotonic()
    while store.get_job(db, job.id).state == "running" and time.monotonic() - t0 < 5:
        activity.touch()
        time.sleep(0.01)
    elapsed = time.monotonic() - t0
    sched.stop()
    thread.join(5)
    row = store.get_job(db, job.id)
    assert row.state == "queued" and row.checkpoint["i"] >= 1 and elapsed < 2.0


def test_stop_makes_the_running_job_yield(db, world):
    sched = make(db, world, [JobSpec("w", stepwise(counting_step(9, [], lambda i: i == 2 and sched.stop())))])
    sched.enqueue("w")
    assert sched.run_next().checkpoint == {"i": 2}


def test_handler_returning_yielded_is_requeued(db, world):
    sched = make(db, world, [JobSpec("w", lambda ctx: YIELDED)])
    sched.enqueue("w")
    assert sched.run_next().state == "queued"


def test_a_malformed_quiet_hours_setting_falls_back_to_the_default(db, world, clock):
    sched = make(db, world, standard_specs(finetune=stepwise(counting_step(1, []))), quiet_hours_start="soon")
    sched.enqueue("finetune")
    assert sched.run_next() is None  # 12:00 is outside 01:00-06:00
    clock.advance(15 * 3600)  # 03:00
    assert sched.run_next().state == "done"
