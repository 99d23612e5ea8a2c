"""`engram jobs ...`: see and steer the idle-time job queue from the terminal (and `engram finetune ...`).

`jobs run` runs a job in the foreground as if the user pressed "run now": idle and quiet hours are skipped,
but a heavy job still waits for another heavy one. Ctrl-C makes it checkpoint and stop; it resumes later.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
from typing import TYPE_CHECKING, Any

from app.cli.arguments import UsageError, count, first_line, row_id
from core.errors import EngramError, InvalidInput

if TYPE_CHECKING:
    from core.scheduler import Scheduler
    from core.store.jobs import Job

# core.store.jobs.JOB_STATES, named here so that parsing the command line opens no SQLite (a test keeps them equal)
JOB_STATES = ("queued", "running", "paused", "done", "failed", "cancelled")


def register(subparsers: argparse._SubParsersAction) -> None:
    jobs = subparsers.add_parser("jobs", help="the background job queue (reflection, consolidation, ...)")
    commands = jobs.add_subparsers(dest="jobs_command", metavar="ACTION", required=True)

    listing = commands.add_parser("list", help="queued, running and paused jobs (--all: finished too)")
    listing.add_argument("--all", action="store_true")
    listing.add_argument("--state", choices=JOB_STATES)
    listing.add_argument("--limit", type=count(), default=50)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_list)

    run = commands.add_parser("run", help="run a job now in the foreground: a job id, or a kind to queue")
    run.add_argument("job", help="job id, or a kind: reflection, consolidation, forgetting, finetune")
    run.add_argument("--payload", default="{}", help="JSON payload for a new job, e.g. '{\"session_id\": 3}'")
    run.add_argument("--queue-only", action="store_true", help="queue it as run-now for the app; don't run here")
    run.set_defaults(func=cmd_run)

    for name, helptext in (("pause", "pause a job (a running one stops at its next checkpoint)"),
                           ("cancel", "cancel a job (a running one stops at its next checkpoint)")):
        action = commands.add_parser(name, help=helptext)
        action.add_argument("id", type=row_id)
        action.set_defaults(func=cmd_request, action=name)


def build_scheduler(services: Any) -> Scheduler:
    """The real scheduler (app.services.scheduling) with this process's handlers."""
    from app.services.scheduling import build_scheduler as real_scheduler
    return real_scheduler(services)


def cmd_list(args: argparse.Namespace, services: Any) -> int:
    from core.store import jobs as store
    states = [args.state] if args.state else (None if args.all else list(store.OPEN_STATES))
    scheduler = build_scheduler(services)
    scheduler.recover()  # a job whose process is gone (a killed `engram finetune now`) shows as interrupted
    rows = store.list_jobs(services.db, states=states, limit=args.limit)
    if args.json:
        print(json.dumps([_job_dict(j, scheduler) for j in rows], indent=2))
        return 0
    if not rows:
        print("no jobs" if args.all or args.state else "no open jobs (use --all for finished ones)")
        return 0
    for job in rows:
        print(_job_line(job, scheduler))
    return 0


def cmd_run(args: argparse.Namespace, services: Any) -> int:
    scheduler = build_scheduler(services)
    job = _job_to_run(args, scheduler)
    if args.queue_only:
        print(f"job {job.id} ({job.kind}) queued to run now")
        return 0
    if job.kind not in scheduler.specs:
        raise EngramError(f"job {job.id} ({job.kind}) is queued to run now, but this command cannot run "
                          f"{job.kind!r} jobs: the app will pick it up")
    scheduler.recover()
    reason = scheduler.waiting_reason(job)
    if reason:
        print(f"job {job.id} ({job.kind}) is queued to run now; it is waiting: {reason}")
        return 0
    previous = signal.signal(signal.SIGINT, lambda *_: scheduler.stop())  # Ctrl-C: checkpoint and stop
    try:
        final = scheduler.run_job(job.id)
    finally:
        signal.signal(signal.SIGINT, previous)
    if final is None:
        raise EngramError(f"job {job.id} could not start: another process took it or a heavy job is running; "
                          "it stays queued")
    print(_job_line(final, scheduler))
    if final.state not in ("done", "queued", "paused"):
        raise EngramError(f"job {final.id} ({final.kind}) {final.state}" + first_line(final.last_error))
    return 0


def cmd_request(args: argparse.Namespace, services: Any) -> int:
    from core.store import jobs as store
    job = store.request(services.db, args.id, args.action)
    if job.state == "running":
        print(f"job {job.id} ({job.kind}) asked to {args.action}; it stops at its next checkpoint")
    else:
        print(f"job {job.id} ({job.kind}) is now {job.state}")
    return 0


def _job_to_run(args: argparse.Namespace, scheduler: Scheduler) -> Job:
    from core.store import jobs as store
    if args.job.lstrip("#").isascii() and args.job.lstrip("#").isdigit():
        try:
            job_id = row_id(args.job)
        except argparse.ArgumentTypeError as exc:  # a number that is not an id: the command line is wrong (exit 2)
            raise UsageError(f"jobs run: argument job: {exc} (see `engram jobs run --help`)") from None
        job = store.get_job(scheduler.db, job_id)
        if job.state == "paused" or (job.state == "queued" and not job.run_now):
            job = scheduler.resume(job.id)
        elif job.state != "queued":
            raise InvalidInput(f"job {job.id} is {job.state}; only queued or paused jobs can be run")
        return job
    try:
        payload = json.loads(args.payload)
    except ValueError as exc:
        raise InvalidInput(f"--payload is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise InvalidInput("--payload must be a JSON object")
    if args.job not in scheduler.specs and args.job not in ("reflection", "consolidation", "forgetting", "finetune"):
        raise InvalidInput(f"unknown job kind {args.job!r}; one of reflection, consolidation, forgetting, finetune")
    return store.enqueue(scheduler.db, args.job, payload=payload, run_now=True)


def _job_dict(job: Job, scheduler: Scheduler) -> dict:
    data = {k: getattr(job, k) for k in ("id", "kind", "state", "run_now", "requested", "payload", "progress",
                                         "message", "attempts", "last_error", "checkpoint", "created_at",
                                         "started_at", "finished_at")}
    data["waiting"] = scheduler.waiting_reason(job) if job.state == "queued" else None
    return data


def _job_line(job: Job, scheduler: Scheduler) -> str:
    when = dt.datetime.fromtimestamp(job.updated_at).strftime("%Y-%m-%d %H:%M")
    parts = [f"{job.id:>4}  {job.kind:<13} {job.state:<9} {job.progress * 100:5.1f}%  tries {job.attempts}  {when}"]
    if job.run_now:
        parts.append("run-now")
    if job.state == "queued":
        parts.append(f"waiting: {scheduler.waiting_reason(job) or 'ready'}")
    if job.requested:
        parts.append(f"{job.requested} requested")
    if job.message:
        parts.append(job.message)
    if job.last_error:
        parts.append(f"last error: {job.last_error}")
    return "  ".join(parts)
