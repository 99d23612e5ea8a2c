"""`engram finetune now|tonight|status|adapters|activate|rollback`: the overnight LoRA fine-tune from the terminal."""
from __future__ import annotations

import argparse
import signal
from typing import TYPE_CHECKING, Any

from app.cli.arguments import first_line, row_id
from core.errors import EngramError

if TYPE_CHECKING:
    from core.finetune import adapters as versions

FINETUNE = "finetune"  # core.jobs.FINETUNE, named here so that parsing opens no SQLite (a test keeps them equal)


def register(subparsers: argparse._SubParsersAction) -> None:
    finetune = subparsers.add_parser("finetune", help="personalise the model's weights from what you taught it")
    commands = finetune.add_subparsers(dest="finetune_command", metavar="ACTION", required=True)
    commands.add_parser("now", help="fine-tune now, in the foreground (Ctrl-C checkpoints and stops)"
                        ).set_defaults(func=cmd_now)
    commands.add_parser("tonight", help="queue a fine-tune for the quiet hours").set_defaults(func=cmd_tonight)
    commands.add_parser("status", help="the active adapter and the fine-tune job").set_defaults(func=cmd_status)
    commands.add_parser("adapters", help="every adapter version with its gate scores").set_defaults(func=cmd_adapters)
    activate = commands.add_parser("activate", help="switch to a kept adapter version")
    activate.add_argument("id", type=row_id)
    activate.set_defaults(func=cmd_activate)
    commands.add_parser("rollback", help="switch adapters off: back to the base model").set_defaults(func=cmd_rollback)


def cmd_now(args: argparse.Namespace, services: Any) -> int:
    from app.services.scheduling import build_scheduler, finetune_base_folder
    from core.finetune.recipe import why_not_ready
    finetune_base_folder(services)  # fail before queueing anything
    not_ready = why_not_ready(services.db)
    if not_ready:
        print(f"no fine-tune queued: {not_ready}")
        return 0
    scheduler = build_scheduler(services)
    scheduler.recover()
    job = scheduler.enqueue(FINETUNE, run_now=True)
    reason = scheduler.waiting_reason(job)
    if reason:
        print(f"fine-tune job {job.id} queued to run now; waiting: {reason}")
        return 0
    scheduler.on_progress = lambda _job, fraction, message: print(f"  {fraction * 100:3.0f}%  {message}",
                                                                  flush=True)
    print("training; Ctrl-C stops at a checkpoint (it resumes with `engram finetune now`)", flush=True)
    previous = signal.signal(signal.SIGINT, lambda *_: scheduler.stop())
    try:
        final = scheduler.run_job(job.id)
    finally:
        signal.signal(signal.SIGINT, previous)
    if final is None:
        raise EngramError(f"fine-tune job {job.id} could not start (another process took it or a heavy job is "
                          "running); it stays queued")
    print(f"fine-tune job {final.id}: {final.state}. {final.message}")
    if final.state == "done" or final.message.startswith("stopped:"):
        return 0
    raise EngramError(f"fine-tune job {final.id} {final.state}" + first_line(final.last_error))


def cmd_tonight(args: argparse.Namespace, services: Any) -> int:
    from core.store import jobs as store
    job = store.enqueue(services.db, FINETUNE)
    quiet = services.settings.scheduler
    print(f"fine-tune job {job.id} queued: it runs between {quiet.quiet_hours_start} and {quiet.quiet_hours_end} "
          "while you are away and the Mac is on power")
    return 0


def cmd_status(args: argparse.Namespace, services: Any) -> int:
    from app.services.scheduling import build_scheduler
    from core.finetune import adapters as versions
    from core.finetune.recipe import why_not_ready
    from core.store import jobs as store
    db = services.db
    build_scheduler(services).recover()  # a run whose process was killed is interrupted, not "running" for ever
    active = versions.active_adapter(db)
    if active is None:
        print("active: the base model (no adapter)")
    else:
        print(f"active: adapter {active.id} ({active.name}), {_scores(active)}")
        if active.is_stale:
            print(f"  stale: {active.stale_reason}; the next fine-tune leaves it out "
                  "(`engram finetune rollback` switches to the base model now)")
    not_ready = why_not_ready(db)
    if not_ready:
        print(f"next fine-tune: none queued; {not_ready}")
    for job in store.list_jobs(db, kind=FINETUNE, limit=3):
        line = f"job {job.id}: {job.state} {job.progress * 100:.0f}%"
        print(line + (f" - {job.message}" if job.message else "") + (f" (last error: {job.last_error})"
                                                                      if job.last_error else ""))
    return 0


def cmd_adapters(args: argparse.Namespace, services: Any) -> int:
    from core.finetune import adapters as versions
    rows = versions.list_adapters(services.db)
    if not rows:
        print("no adapters yet")
    for adapter in rows:
        flags = " ".join(f for f, on in (("ACTIVE", adapter.active), ("stale", adapter.is_stale)) if on)
        print(f"{adapter.id:>4}  {adapter.status:<9} {flags:<12} {adapter.name}  {_scores(adapter)}")
    return 0


def cmd_activate(args: argparse.Namespace, services: Any) -> int:
    from core.finetune import adapters as versions
    adapter = versions.activate(services.db, args.id)
    print(f"adapter {adapter.id} is active; the app switches to it on its next turn")
    return 0


def cmd_rollback(args: argparse.Namespace, services: Any) -> int:
    from core.finetune import adapters as versions
    previous = versions.rollback_to_base(services.db)
    print("back to the base model" + (f" (adapter {previous.id} switched off; it is kept)" if previous else ""))
    return 0


def _scores(adapter: versions.Adapter) -> str:
    m = adapter.metrics
    if "baseline" not in m:
        return "no scores"
    base, new = m["baseline"], m["candidate"]
    known = (f", known facts {base['known_fact_loss']:.3f} -> {new['known_fact_loss']:.3f}"
             if base.get("known_fact_loss") is not None and new.get("known_fact_loss") is not None else "")
    return (f"held-out probes {base['probe_loss']:.3f} -> {new['probe_loss']:.3f}, "
            f"general ppl {base['general_ppl']:.1f} -> {new['general_ppl']:.1f}{known}")
