"""The real idle-time scheduler for a data folder: the four job kinds with their real handlers.

- reflection: core.memory.reflect over the session in the payload ({"session_id": N}), or over every ended
  session not reflected on yet, one session per batch; needs the chat model (structured output).
- consolidation: core.memory.consolidate.Consolidator in batches (the model writes cluster summaries when
  one is installed; without one the summaries are deterministic and keep every fact).
- forgetting: one core.memory.forget.forgetting_pass (no model).
- finetune: models.finetune.FineTuner on the chosen chat model.

Every handler works on the scheduler's own database connection (`db`), so a scheduler built on a jobs
thread never touches another thread's connection. Models and the embedder load only when a job runs.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from core.conditions import ActivityTracker, CachedProbe, ModelGate, combined_idle
from core.config import Settings
from core.errors import InvalidInput, ModelError
from core.jobs import CONSOLIDATION, FINETUNE, FORGETTING, REFLECTION, ROUTINE_INTERVALS, Handler, Step, \
    standard_specs, stepwise
from core.scheduler import Environment, JobContext, Scheduler
from core.store.db import Database
from core.store.jobs import OPEN_STATES, Job, list_jobs

SYSTEM_IDLE_TTL = 1.0  # seconds between ioreg runs
POWER_TTL = 60.0  # seconds between pmset runs


def build_scheduler(services: Any, *, db: Database | None = None, env: Environment | None = None,
                    activity: ActivityTracker | None = None, model_gate: ModelGate | None = None) -> Scheduler:
    """A Scheduler over `db` (default: the services' connection) whose handlers are the real ones."""
    db = db or services.db
    handlers = real_handlers(services, db)
    handlers.update(getattr(services, "job_handlers", lambda: {})() or {})  # a caller may supply its own
    return Scheduler(db, standard_specs(**handlers), settings=services.settings.scheduler,
                     env=env or default_environment(db, activity, model_gate))


def finetune_base_folder(services: Any) -> str:
    """The chosen chat model's local folder (installed, a folder, or already in the Hugging Face cache): the base
    a fine-tune trains on. Fine-tuning never downloads on its own."""
    if not services.settings.chat_model:
        raise InvalidInput("no chat model is chosen yet: choose the one to personalise with `engram models use "
                           "NAME` (`engram models` lists them) or in Settings")
    return str(services.chat_model_folder())


def default_environment(db: Database, activity: ActivityTracker | None = None,
                        model_gate: ModelGate | None = None) -> Environment:
    """Idle = the most recent of the app's own input and (on macOS) the system's; power from pmset or sysfs."""
    from app.services.platform import on_ac_power, system_idle_seconds
    # ioreg and pmset are subprocesses, and a running job asks several times a second whether to yield: once a
    # second for idle time is enough (the app's own input is seen at once), once a minute for the power source.
    system_idle = CachedProbe(system_idle_seconds, ttl=SYSTEM_IDLE_TTL)
    probes = [system_idle] + ([activity.idle_seconds] if activity is not None else [])
    return Environment(clock=db.clock, idle_seconds=combined_idle(*probes),
                       on_ac_power=CachedProbe(on_ac_power, ttl=POWER_TTL), model_gate=model_gate or ModelGate())


def real_handlers(services: Any, db: Database) -> dict[str, Handler]:
    return {"reflect": reflection_handler(services, db), "consolidate": consolidation_handler(services, db),
            "forget": forgetting_handler(services, db), "finetune": finetune_handler(services, db)}


def structured_model(services: Any, *, required: bool) -> Any:
    """The structured-output model, or None when no chat model is installed (and it is optional)."""
    try:
        model = services.structured_model()
    except ModelError:
        if required:
            raise
        return None
    if model is None and required:
        raise ModelError("reflection needs a local chat model; choose one with `engram models`")
    return model


def reflection_handler(services: Any, db: Database) -> Handler:
    from core.memory import reflect

    def step(payload: Mapping[str, Any], state: Mapping[str, Any]) -> Step:
        todo = list(state.get("todo", [payload["session_id"]] if "session_id" in payload
                              else reflect.ended_sessions(db, services.settings)))
        done = int(state.get("done", 0))
        if not todo:
            return Step({"todo": [], "done": done}, 1.0, f"reflected on {done} session(s)", done=True)
        model = structured_model(services, required=True)  # loaded only when there is a session to review
        report = reflect.reflect_session(db, services.settings, model, int(todo[0]), embedder=services.embedder)
        rest = todo[1:]
        return Step({"todo": rest, "done": done + 1}, (done + 1) / (done + 1 + len(rest)),
                    f"session {report.session_id}: {len(report.added)} new, "
                    f"{len(report.strengthened)} strengthened hypotheses", done=not rest)
    return stepwise(step)


def consolidation_handler(services: Any, db: Database) -> Handler:
    from core.memory.consolidate import Consolidator

    def handler(ctx: JobContext) -> Optional[str]:
        model = structured_model(services, required=False)
        consolidator = Consolidator(db, services.settings, services.embedder, model)
        return stepwise(consolidator.step)(ctx)
    return handler


def forgetting_handler(services: Any, db: Database) -> Handler:
    from core.memory import forget

    def step(payload: Mapping[str, Any], state: Mapping[str, Any]) -> Step:
        result = forget.forgetting_pass(db, services.settings, embedder=services.embedder)
        return Step({"archived": len(result.archived), "compacted": len(result.compacted)}, 1.0,
                    f"archived {len(result.archived)} facts, compacted {len(result.compacted)} turns "
                    f"into {len(result.summaries)} summaries", done=True)
    return stepwise(step)


def finetune_handler(services: Any, db: Database) -> Handler:
    def handler(ctx: JobContext) -> Optional[str]:
        from models.finetune import FineTuner
        tuner = FineTuner(db, finetune_base_folder(services), services.data_dir / "adapters")
        return tuner(ctx)
    return handler


def queue_reflection(scheduler: Scheduler, session_id: int) -> Job:
    """A session ended: reflect on it when the user is away."""
    return scheduler.enqueue(REFLECTION, payload={"session_id": int(session_id)})


def plan(scheduler: Scheduler, settings: Settings,
         intervals: Mapping[str, float] = ROUTINE_INTERVALS) -> list[Job]:
    """Queue what is due under the settings in force now: the routine kinds, and a reflection when ended (or
    long quiet) sessions wait for one.

    Only what could do something: nothing while the store is empty, and no job that uses the chat model
    before one is chosen (a fresh install showed fine-tune and consolidation queued for a model it did not have).
    """
    from core.memory.reflect import ended_sessions
    scheduler.settings = settings.scheduler  # idle minutes and quiet hours as saved now (Settings, a CLI)
    if not _has_anything(scheduler.db):
        return []
    runnable = {kind: every for kind, every in intervals.items() if _can_run(scheduler, settings, kind)}
    added = scheduler.plan_routine(runnable)
    if _can_run(scheduler, settings, REFLECTION) and ended_sessions(scheduler.db, settings) and not list_jobs(
            scheduler.db, states=OPEN_STATES, kind=REFLECTION, limit=1):
        added.append(scheduler.enqueue(REFLECTION))
    return added


def _can_run(scheduler: Scheduler, settings: Settings, kind: str) -> bool:
    spec = scheduler.specs.get(kind)
    return spec is not None and (bool(settings.chat_model) or not spec.uses_model)


def _has_anything(db: Database) -> bool:
    return bool(db.scalar("SELECT EXISTS(SELECT 1 FROM memories) OR EXISTS(SELECT 1 FROM episodes)"))


KINDS: tuple[str, ...] = (REFLECTION, CONSOLIDATION, FORGETTING, FINETUNE)
