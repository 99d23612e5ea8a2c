"""The idle-time job queue: reflection, consolidation, forgetting and fine-tuning run while the user is away.

Jobs live in the store (core.store.jobs), so a crash or a quit loses nothing: a job found 'running' without
a live owner at the next start resumes from its last checkpoint. Handlers are cooperative: they poll
`ctx.should_yield()` between batches or steps, save a checkpoint and stop, and the scheduler requeues them.
The clock, the idle source, the power probe and local time are injected.
"""
from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

from core.conditions import LEARNING, ModelGate, chat_reason, in_quiet_hours
from core.config import SchedulerSettings
from core.errors import InvalidInput, StoreCorrupt
from core.store import health
from core.store import jobs as store
from core.store.db import Database
from core.store.jobs import Job

YIELDED = "yielded"  # a handler returns this after it checkpointed and stopped early
LEASE_SECONDS = 600.0  # a running row not heard from for this long is treated as orphaned
HEARTBEAT_EVERY = 5.0


class JobInterrupted(Exception):
    """Raised by ctx.yield_now(): the handler stops here; its checkpoint is already saved."""


@dataclass(frozen=True)
class JobSpec:
    """How one kind of job runs and when it may."""

    kind: str
    handler: Callable[["JobContext"], Any]
    heavy: bool = False  # at most one heavy job runs at a time, across processes
    uses_model: bool = False  # waits for, and yields to, chat
    needs_power: bool | None = None  # default: heavy jobs wait for AC power
    quiet_hours_only: bool = False  # fine-tuning: only inside Settings.scheduler quiet hours
    max_attempts: int = 3
    retry_after_seconds: float = 600.0

    @property
    def wants_power(self) -> bool:
        return self.heavy if self.needs_power is None else self.needs_power


@dataclass
class Environment:
    """The scheduler's view of the world; every part is replaceable in tests."""

    clock: Callable[[], float] = time.time
    idle_seconds: Callable[[], float] = lambda: 0.0
    on_ac_power: Callable[[], Optional[bool]] = lambda: None  # None (unknown) counts as on power
    localtime: Callable[[float], time.struct_time] = time.localtime
    model_gate: ModelGate = field(default_factory=ModelGate)
    # Held while a job runs on power: the app's keeps a Mac from idle sleep (app.services.platform.keep_awake),
    # since jobs start after minutes of idleness, about when a laptop would go to sleep.
    keep_awake: Callable[[str], AbstractContextManager] = lambda reason: nullcontext()


class JobContext:
    """What a handler sees: its payload, the state to resume from, and the calls to report and yield."""

    def __init__(self, scheduler: "Scheduler", job: Job, spec: JobSpec) -> None:
        self._scheduler = scheduler
        self.job = job
        self.spec = spec
        self.payload: Mapping[str, Any] = dict(job.payload or {})
        self.resume: Optional[Mapping[str, Any]] = dict(job.checkpoint) if job.checkpoint else None
        self.yield_reason: Optional[str] = None
        self._last_beat = scheduler.env.clock()

    def progress(self, fraction: float, message: str = "") -> None:
        store.heartbeat(self._scheduler.db, self.job.id, progress=fraction, message=message)
        self._last_beat = self._scheduler.env.clock()
        if self._scheduler.on_progress is not None:  # a foreground run shows it (`engram finetune now`)
            self._scheduler.on_progress(self.job, fraction, message)

    def checkpoint(self, state: Mapping[str, Any]) -> None:
        store.save_checkpoint(self._scheduler.db, self.job.id, state)
        self._last_beat = self._scheduler.env.clock()

    def should_yield(self) -> bool:
        """True when the job must stop soon: the user came back, chat wants the model, pause/cancel/quit."""
        now = self._scheduler.env.clock()
        if now - self._last_beat >= HEARTBEAT_EVERY:
            store.heartbeat(self._scheduler.db, self.job.id)
            self._last_beat = now
        self.yield_reason = self._scheduler.yield_reason(self.job, self.spec)
        return self.yield_reason is not None

    def yield_now(self, state: Optional[Mapping[str, Any]] = None) -> None:
        """Save `state` (if given) and leave the handler by raising JobInterrupted."""
        if state is not None:
            self.checkpoint(state)
        raise JobInterrupted(self.yield_reason or "yield")


class Scheduler:
    def __init__(self, db: Database, specs: Iterable[JobSpec], *, settings: SchedulerSettings | None = None,
                 env: Environment | None = None, owner: str | None = None,
                 owner_alive: Callable[[str], bool] | None = None) -> None:
        self.db = db
        self.specs = {s.kind: s for s in specs}
        self.settings = settings or SchedulerSettings()
        self.env = env or Environment()
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._owner_alive = owner_alive or owner_is_alive
        self._stop = threading.Event()
        self.on_progress: Optional[Callable[[Job, float, str], None]] = None
        self.memo: dict[str, Any] = {}  # what a planner computed and may reuse while the store is unchanged

    # -- queue ---------------------------------------------------------------------------------------------
    def enqueue(self, kind: str, *, payload: Mapping[str, Any] | None = None, run_now: bool = False) -> Job:
        self.spec_for(kind)
        return store.enqueue(self.db, kind, payload=payload, run_now=run_now)

    def spec_for(self, kind: str) -> JobSpec:
        if kind not in self.specs:
            raise InvalidInput(f"unknown job kind {kind!r}; known: {', '.join(sorted(self.specs)) or 'none'}")
        return self.specs[kind]

    def recover(self) -> list[Job]:
        """Requeue jobs left 'running' by a process that died (crash, kill, quit mid-job)."""
        recovered = []
        now = self.env.clock()
        for job in store.running_jobs(self.db):
            stale = job.heartbeat_at is None or now - job.heartbeat_at > LEASE_SECONDS
            if job.owner != self.owner and (stale or not self._owner_alive(job.owner or "")):
                recovered.append(store.requeue_orphan(self.db, job.id, f"interrupted (owner {job.owner} gone)"))
        return recovered

    # -- conditions ----------------------------------------------------------------------------------------
    def waiting_reason(self, job: Job) -> Optional[str]:
        """Why a queued job may not start now (None: it may)."""
        spec = self.specs.get(job.kind)
        if spec is None:
            return f"no handler for {job.kind!r} in this process"
        now = self.env.clock()
        if job.not_before is not None and now < job.not_before and not job.run_now:
            return "waiting to retry"
        busy = self.env.model_gate.busy_with() if spec.uses_model else None
        if busy == LEARNING and job.run_now:  # the user asked for it now: the chat's learning hands over
            self.env.model_gate.want(job.id)
            return f"{chat_reason(busy)}, which gives way to it now"
        if busy:
            return chat_reason(busy)
        if spec.heavy and self._heavy_running():
            return "another heavy job is running"
        if job.run_now:
            return None
        return self._background_reason(spec, now)

    def yield_reason(self, job: Job, spec: JobSpec) -> Optional[str]:
        """Why a running job must stop now (None: it may go on)."""
        if self._stop.is_set():
            return "scheduler stopping"
        requested = store.requested_action(self.db, job.id)
        if requested:
            return requested
        busy = self.env.model_gate.busy_with() if spec.uses_model else None
        if busy and not (busy == LEARNING and job.run_now):  # learning gives way to a job the user started
            return chat_reason(busy)
        if job.run_now:
            return None
        return self._background_reason(spec, self.env.clock())

    def _background_reason(self, spec: JobSpec, now: float) -> Optional[str]:
        if self.env.idle_seconds() < self.settings.idle_minutes * 60.0:
            return "user is active"
        if spec.wants_power and self.settings.require_ac_power and self.env.on_ac_power() is False:
            return "on battery"
        if spec.quiet_hours_only and not self._in_quiet_hours(now):
            return "outside quiet hours"
        return None

    def _in_quiet_hours(self, now: float) -> bool:
        local = self.env.localtime(now)
        try:
            return in_quiet_hours(local, self.settings.quiet_hours_start, self.settings.quiet_hours_end)
        except ValueError:  # a hand-edited setting that is not a time: use the documented default
            defaults = SchedulerSettings()
            return in_quiet_hours(local, defaults.quiet_hours_start, defaults.quiet_hours_end)

    def _heavy_running(self) -> bool:
        heavy = [k for k, s in self.specs.items() if s.heavy]
        return any(j.kind in heavy for j in store.running_jobs(self.db))

    # -- running -------------------------------------------------------------------------------------------
    def next_runnable(self) -> Optional[Job]:
        """Run-now jobs first, then the oldest queued job whose conditions hold."""
        queued = store.list_jobs(self.db, states=["queued"], limit=1000)
        queued.sort(key=lambda j: (not j.run_now, j.created_at, j.id))
        for job in queued:
            if self.waiting_reason(job) is None:
                return job
        return None

    def run_next(self) -> Optional[Job]:
        """Start the next runnable job and run it until it finishes or yields; returns its final row."""
        job = self.next_runnable()
        return self.run_job(job.id) if job is not None else None

    def run_job(self, job_id: int) -> Optional[Job]:
        """Claim and run one queued job in this thread; None if it could not be claimed."""
        job = store.get_job(self.db, job_id)
        spec = self.spec_for(job.kind)
        heavy = [k for k, s in self.specs.items() if s.heavy] if spec.heavy else []
        claimed = store.claim(self.db, job.id, self.owner, heavy_kinds=heavy)
        if claimed is None:
            return None
        ctx = JobContext(self, claimed, spec)
        if claimed.run_now and spec.uses_model:
            self.env.model_gate.want(claimed.id)  # the chat's learning waits until this job ends or yields
        try:
            return self._run_claimed(ctx, spec)
        finally:
            self.env.model_gate.unwant(claimed.id)

    def _run_claimed(self, ctx: JobContext, spec: JobSpec) -> Job:
        try:
            with self._awake_for(ctx.job):
                result = spec.handler(ctx)
        except JobInterrupted:
            return self._after_yield(ctx)
        except Exception as exc:  # a failing handler must not take the scheduler (or the app) down
            if health.is_corruption(exc):  # ...unless the file is damaged: record nothing more into it, stop
                raise self._damaged(exc) from None
            return self._after_failure(ctx, exc)
        if result == YIELDED:
            return self._after_yield(ctx)
        return store.finish(self.db, ctx.job.id, "done")

    def _awake_for(self, job: Job) -> AbstractContextManager:
        """Keep the machine from idle sleep while `job` runs, unless on battery (a job there must not drain it);
        let go when the handler returns, yields or fails."""
        if self.env.on_ac_power() is False:
            return nullcontext()
        return self.env.keep_awake(f"Engram: {job.kind}")

    def _damaged(self, exc: Exception) -> StoreCorrupt:
        if isinstance(exc, StoreCorrupt):
            return exc
        health.mark_damaged(self.db.path, str(exc))
        return StoreCorrupt(health.damaged_message(self.db.path, str(exc)))

    def _after_yield(self, ctx: JobContext) -> Job:
        reason = ctx.yield_reason or self.yield_reason(ctx.job, ctx.spec) or "yielded"
        target = {"pause": "paused", "cancel": "cancelled"}.get(reason, "queued")
        store.heartbeat(self.db, ctx.job.id, message=f"stopped: {reason}")
        return store.finish(self.db, ctx.job.id, target)

    def _after_failure(self, ctx: JobContext, exc: Exception) -> Job:
        error = f"{type(exc).__name__}: {exc}"
        attempts = store.get_job(self.db, ctx.job.id).attempts
        if attempts >= ctx.spec.max_attempts:
            return store.finish(self.db, ctx.job.id, "failed", error=error)
        retry_at = self.env.clock() + ctx.spec.retry_after_seconds * attempts
        return store.finish(self.db, ctx.job.id, "queued", error=error, not_before=retry_at)

    def run_forever(self, *, poll_seconds: float = 2.0, tick: Callable[[], object] | None = None) -> None:
        """The app's background loop: recover orphans, then run whatever may run, until stop()."""
        self._stop.clear()
        self.recover()
        while not self._stop.is_set():
            if tick is not None:
                tick()
            if self.run_next() is None:
                self.recover()  # another process (a CLI run) may have died holding a job
                self._stop.wait(poll_seconds)

    def stop(self) -> None:
        """Ask the running handler to yield and the loop to end (app quit)."""
        self._stop.set()

    # -- control -------------------------------------------------------------------------------------------
    def pause(self, job_id: int) -> Job:
        return store.request(self.db, job_id, "pause")

    def cancel(self, job_id: int) -> Job:
        return store.request(self.db, job_id, "cancel")

    def resume(self, job_id: int) -> Job:
        return store.request(self.db, job_id, "resume")

    def job(self, job_id: int) -> Job:
        return store.get_job(self.db, job_id)

    def plan_routine(self, intervals: Mapping[str, float]) -> list[Job]:
        """Queue each routine kind (consolidation, forgetting, fine-tune) whose last run is older than its
        interval in seconds and that has no open job already."""
        added = []
        now = self.env.clock()
        for kind, every in intervals.items():
            if kind not in self.specs or store.list_jobs(self.db, states=store.OPEN_STATES, kind=kind, limit=1):
                continue
            last = store.last_finished(self.db, kind)
            if last is None or (last.finished_at or 0.0) + every <= now:
                added.append(self.enqueue(kind))
        return added


def owner_is_alive(owner: str) -> bool:
    """An owner is 'host:pid:token'. On this host, a dead pid means the job was orphaned; elsewhere we
    cannot tell and rely on the heartbeat lease."""
    parts = owner.split(":")
    if len(parts) < 2 or parts[0] != socket.gethostname():
        return True
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True
