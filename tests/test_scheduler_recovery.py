"""A job interrupted by a crash (SIGKILL mid-job) is found 'running' at the next start and resumes from
its checkpoint rather than from the beginning."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from core.config import SchedulerSettings
from core.jobs import Step, stepwise
from core.scheduler import Environment, JobSpec, Scheduler
from core.store import jobs as store
from core.store.db import open_db

REPO = Path(__file__).resolve().parents[1]

WORKER = r"""
import sys, time
from core.config import SchedulerSettings
from core.jobs import Step, stepwise
from core.scheduler import Environment, JobSpec, Scheduler
from core.store.db import open_db

db = open_db(sys.argv[1])

def step(payload, state):
    i = state.get("i", 0) + 1
    time.sleep(0.05)
    return Step(state={"i": i}, fraction=i / 1000, done=i >= 1000)

sched = Scheduler(db, [JobSpec("consolidation", stepwise(step), heavy=True)],
                  env=Environment(idle_seconds=lambda: 1e9))
sched.run_job(int(sys.argv[2]))
"""


def test_a_killed_job_resumes_from_its_checkpoint(tmp_path):
    path = tmp_path / "engram.db"
    db = open_db(path)
    job = store.enqueue(db, "consolidation")
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(path), str(job.id)], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            row = store.get_job(db, job.id)
            if row.checkpoint and row.checkpoint["i"] >= 5:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the worker never reached step 5: {store.get_job(db, job.id)}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    killed = store.get_job(db, job.id)
    assert killed.state == "running" and killed.owner.split(":")[1] == str(proc.pid)
    reached = killed.checkpoint["i"]

    resumed_from = []

    def step(payload, state):
        if not resumed_from:
            resumed_from.append(dict(state))
        i = state["i"] + 1
        return Step(state={"i": i}, fraction=i / 1000, done=True)
    sched = Scheduler(db, [JobSpec("consolidation", stepwise(step), heavy=True)], settings=SchedulerSettings(),
                      env=Environment(idle_seconds=lambda: 1e9))
    # The orphan blocks other heavy work until it is recovered.
    assert sched.waiting_reason(store.enqueue(db, "consolidation", payload={"other": 1})) == \
        "another heavy job is running"
    recovered = sched.recover()
    assert [j.id for j in recovered] == [job.id] and recovered[0].state == "queued"
    assert "interrupted" in recovered[0].last_error
    final = sched.run_job(job.id)
    assert resumed_from == [{"i": reached}]
    assert final.state == "done" and final.attempts == 2 and final.checkpoint["i"] > reached
    db.close()


def test_a_live_owner_is_not_recovered(db):
    job = store.enqueue(db, "w")
    store.claim(db, job.id, "elsewhere:1:abc")
    sched = Scheduler(db, [], env=Environment(clock=db.clock), owner_alive=lambda owner: True)
    assert sched.recover() == []
    sched_dead = Scheduler(db, [], env=Environment(clock=db.clock), owner_alive=lambda owner: False)
    assert [j.id for j in sched_dead.recover()] == [job.id]
