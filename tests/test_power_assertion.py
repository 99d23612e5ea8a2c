"""A job running on power keeps a Mac from idle sleep (issue 36.10): jobs start after minutes of idleness, about when
a laptop sleeps, so the app holds `caffeinate -i -w PID` for the length of each job, lets go when it ends, yields or
fails, holds nothing on battery, and does nothing off macOS. caffeinate is a recorded runner here, as ioreg and
pmset are in tests/test_idle_power.py."""
from __future__ import annotations

import contextlib
import subprocess
import time

import pytest

from app.services.platform import keep_awake
from core.config import SchedulerSettings
from core.scheduler import YIELDED, Environment, JobSpec, Scheduler

IDLE = 11 * 60.0


class RecordedCaffeinate:
    """subprocess.Popen as the app calls it for caffeinate: notes the command and whether it was let go."""

    def __init__(self) -> None:
        self.argv: list[list[str]] = []
        self.alive = 0

    def __call__(self, argv, **kwargs):
        self.argv.append(list(argv))
        self.alive += 1
        return self

    def terminate(self) -> None:
        self.alive -= 1

    def wait(self, timeout=None) -> int:
        return 0


def test_on_macos_a_caffeinate_child_is_held_for_the_with_and_let_go_after():
    caffeinate = RecordedCaffeinate()
    with keep_awake("Engram: finetune", platform="darwin", spawn=caffeinate, pid=4242):
        assert caffeinate.alive == 1
    assert caffeinate.argv == [["caffeinate", "-i", "-w", "4242"]]  # it also ends by itself if the app dies
    assert caffeinate.alive == 0
    with pytest.raises(RuntimeError), keep_awake("Engram: finetune", platform="darwin", spawn=caffeinate):
        raise RuntimeError("the job failed")
    assert caffeinate.alive == 0


def test_off_macos_nothing_is_started_and_a_missing_caffeinate_changes_nothing():
    caffeinate = RecordedCaffeinate()
    with keep_awake("Engram: reflect", platform="linux", spawn=caffeinate):
        pass
    assert caffeinate.argv == []

    def missing(argv, **kwargs):
        raise FileNotFoundError(argv[0])
    with keep_awake("Engram: reflect", platform="darwin", spawn=missing):
        ran = True
    assert ran
    with keep_awake("Engram: reflect", platform="darwin", spawn=subprocess.Popen):  # this machine has none
        pass


class Held:
    """The scheduler's keep_awake hook, noting each hold and whether one is held now."""

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.now = False

    @contextlib.contextmanager
    def __call__(self, reason):
        self.reasons.append(reason)
        self.now = True
        try:
            yield
        finally:
            self.now = False


def scheduler(db, clock, handler, *, power=True, held=None):
    env = Environment(clock=clock, idle_seconds=lambda: IDLE, on_ac_power=lambda: power, localtime=time.gmtime,
                      keep_awake=held)
    return Scheduler(db, [JobSpec("finetune", handler, heavy=True), JobSpec("forget", handler)],
                     settings=SchedulerSettings(), env=env)


def test_a_job_on_power_holds_the_assertion_while_it_runs_and_lets_go_when_it_ends_yields_or_fails(db, clock):
    held = Held()
    seen = []

    def handler(ctx):
        seen.append(held.now)
        if ctx.payload.get("yield"):
            return YIELDED
        if ctx.payload.get("fail"):
            raise RuntimeError("boom")
        return None
    sched = scheduler(db, clock, handler, held=held)
    for payload in ({}, {"yield": True}, {"fail": True}):
        job = sched.enqueue("finetune", payload=payload, run_now=True)
        sched.run_job(job.id)
        assert held.now is False
    assert seen == [True, True, True]
    assert held.reasons == ["Engram: finetune"] * 3


def test_on_battery_a_job_holds_nothing(db, clock):
    held = Held()
    seen = []
    sched = scheduler(db, clock, lambda ctx: seen.append(held.now), power=False, held=held)
    sched.run_job(sched.enqueue("forget").id)  # a light job runs on battery, without keeping the Mac awake
    assert seen == [False] and held.reasons == []


def test_the_apps_environment_keeps_a_mac_awake(db):
    from app.services.scheduling import default_environment
    env = default_environment(db)
    assert env.keep_awake is keep_awake
