"""What the Jobs panel shows, read off the GUI thread, and the worker thread that runs a job the user starts.

`read_jobs` runs on the database lane and returns plain data. `JobHost` runs "Run now" jobs on its own thread
with its own connection to the store, so a long job (a fine-tune) never holds up the database lane; claiming
a job is atomic, so the app's idle-time loop and this host can never run the same job twice.
"""
from __future__ import annotations

import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from app.services.scheduling import finetune_not_ready
from core.conditions import chat_reason, in_quiet_hours
from core.finetune import adapters as versions
from core.scheduler import Scheduler
from core.store import jobs as store
from core.store.db import open_db
from core.store.jobs import Job

RECENT_FINISHED = 20
LOSS_PATTERN = re.compile(r"step (\d+)/(\d+), loss ([-+0-9.eE]+|nan|inf)")


@dataclass(frozen=True)
class Conditions:
    """The scheduler's view of the world right now, as the panel's header line shows it."""
    idle_seconds: float
    idle_needed_seconds: float
    on_ac_power: Optional[bool]
    require_ac_power: bool
    quiet_start: str
    quiet_end: str
    in_quiet_hours: bool
    model_busy_with: Optional[str]  # what the chat is doing with the model (core.conditions), None: free

    def summary(self) -> str:
        idle = (f"You have been away {int(self.idle_seconds // 60)} min"
                if self.idle_seconds >= 60 else "You are active")
        idle += f" (background work starts after {int(self.idle_needed_seconds // 60)} min)"
        power = {True: "on power", False: "on battery", None: "power unknown (counts as on power)"}[self.on_ac_power]
        quiet = (f"quiet hours {self.quiet_start}–{self.quiet_end} "
                 f"({'now' if self.in_quiet_hours else 'not now'})")
        chat = chat_reason(self.model_busy_with) if self.model_busy_with else "model free"
        return " · ".join((idle, power, quiet, chat))


@dataclass(frozen=True)
class JobRow:
    job: Job
    waiting: Optional[str]  # why a queued job is not running yet
    eta_seconds: Optional[float]


@dataclass(frozen=True)
class JobsSnapshot:
    conditions: Optional[Conditions]  # None when not read this time (they are read every few seconds)
    jobs: list[JobRow]
    adapters: list[versions.Adapter]
    kinds: list[str]
    finetune_not_ready: Optional[str] = None  # why no fine-tune is queued ("" ready; None not read this time)
    imports: Optional[str] = None  # how far learning from imported history is ("" none; None not read this time)
    taken_at: float = field(default_factory=time.time)


def read_jobs(scheduler: Scheduler, *, with_conditions: bool = True) -> JobsSnapshot:
    """Everything the panel draws, in one read (database lane)."""
    db, now = scheduler.db, scheduler.env.clock()
    open_jobs = store.list_jobs(db, states=store.OPEN_STATES, limit=200)
    finished = store.list_jobs(db, states=store.FINISHED_STATES, limit=RECENT_FINISHED)
    rows = [JobRow(job, scheduler.waiting_reason(job) if job.state == "queued" else None, eta(job, now))
            for job in open_jobs + finished]
    return JobsSnapshot(conditions(scheduler, now) if with_conditions else None, rows,
                        versions.list_adapters(db), sorted(scheduler.specs),
                        finetune_not_ready(scheduler) if with_conditions else None,
                        import_learning(db) if with_conditions else None)


def import_learning(db: Any) -> str:
    """'Learning from your history: ChatGPT 1,204 of 4,000 turns' for each import not learned from whole yet."""
    from core.importers.batches import list_batches
    from core.importers.conversations import SOURCES
    waiting = [b for b in list_batches(db) if b.learned < b.turns]
    if not waiting:
        return ""
    return "Learning from your imported history while you are away: " + "; ".join(
        f"{SOURCES.get(b.source, b.source)} {b.learned:,} of {b.turns:,} turns" for b in waiting)


def conditions(scheduler: Scheduler, now: float) -> Conditions:
    settings, env = scheduler.settings, scheduler.env
    try:
        quiet = in_quiet_hours(env.localtime(now), settings.quiet_hours_start, settings.quiet_hours_end)
    except ValueError:
        quiet = False
    return Conditions(idle_seconds=env.idle_seconds(), idle_needed_seconds=settings.idle_minutes * 60.0,
                      on_ac_power=env.on_ac_power(), require_ac_power=settings.require_ac_power,
                      quiet_start=settings.quiet_hours_start, quiet_end=settings.quiet_hours_end,
                      in_quiet_hours=quiet, model_busy_with=env.model_gate.busy_with())


def eta(job: Job, now: float) -> Optional[float]:
    """Time left for a running job: its own estimate if it reports one ("ETA 42s"), else by its progress rate."""
    if job.state != "running":
        return None
    reported = re.search(r"ETA (\d+(?:\.\d+)?)s", job.message or "")
    if reported:
        return float(reported.group(1))
    if job.started_at is None or job.progress <= 0.01:
        return None
    return (now - job.started_at) / job.progress * (1.0 - job.progress)


def loss_point(message: str) -> Optional[tuple[int, float]]:
    """(step, loss) from a fine-tune progress message, e.g. 'step 12/40, loss 2.311, 850 tok/s, ETA 30s'."""
    found = LOSS_PATTERN.search(message or "")
    return (int(found.group(1)), float(found.group(3))) if found else None


class LossHistory:
    """The loss points seen per fine-tune job while the panel watched it (the live curve)."""

    def __init__(self) -> None:
        self._points: dict[int, dict[int, float]] = {}

    def observe(self, job: Job) -> None:
        point = loss_point(job.message) if job.kind == "finetune" else None
        if point is not None:
            self._points.setdefault(job.id, {})[point[0]] = point[1]

    def curve(self, job_id: int) -> tuple[list[int], list[float]]:
        points = sorted(self._points.get(job_id, {}).items())
        return [s for s, _ in points], [v for _, v in points]

    def latest_job(self) -> Optional[int]:
        return max(self._points) if self._points else None


SchedulerFactory = Callable[[Any, Any], Scheduler]  # (services, db) -> a Scheduler working on that connection


class JobHost:
    """Runs the jobs the user starts from the panel, one at a time, on a thread with its own store connection."""

    def __init__(self, services: Any, scheduler_factory: SchedulerFactory) -> None:
        self.services = services
        self.scheduler_factory = scheduler_factory
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-jobs")
        self._local: Any = None  # (connection, scheduler) private to the jobs thread
        self._lock = threading.Lock()

    def run(self, job_id: int, on_finished: Callable[[Optional[Job]], None] | None = None) -> Future:
        def work() -> Optional[Job]:
            final = self._scheduler().run_job(job_id)
            if on_finished is not None:
                on_finished(final)
            return final
        return self._executor.submit(work)

    def _scheduler(self) -> Scheduler:
        with self._lock:
            if self._local is None:
                main = self.services.db  # opened (and migrated) first, through the services
                own = open_db(main.path, clock=main.clock)  # one connection per thread; WAL lets both write
                self._local = (own, self.scheduler_factory(self.services, own))
            return self._local[1]

    def shutdown(self) -> None:
        """Ask a running job to checkpoint and stop, then close this thread's connection."""
        with self._lock:
            local = self._local
        if local is not None:
            local[1].stop()
        self._executor.shutdown(wait=True, cancel_futures=True)
        if local is not None:
            local[0].close()
