"""The real idle-time scheduler for a data folder: the four job kinds with their real handlers.

- reflection: first the chat turns still waiting to be learned (core.assistant.pending_learning: skipped while
  the user was busy, or the app quit first), a batch at a time; then core.memory.reflect over the session in the
  payload ({"session_id": N}), or over every ended session not reflected on yet, one session per batch; needs
  the chat model (structured output).
- consolidation: core.memory.consolidate.Consolidator in batches (the model writes cluster summaries when
  one is installed; without one the summaries are deterministic and keep every fact).
- forgetting: one core.memory.forget.forgetting_pass (no model).
- finetune: models.finetune.FineTuner on the chosen chat model.

Every handler works on the scheduler's own database connection (`db`), so a scheduler built on a jobs
thread never touches another thread's connection. Models and the embedder load only when a job runs.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from core.conditions import ActivityTracker, CachedProbe, ModelGate, combined_idle
from core.config import Settings
from core.errors import InvalidInput, ModelError
from core.finetune.recipe import readiness_key, why_not_ready
from core.jobs import CONSOLIDATION, FINETUNE, FORGETTING, REFLECTION, ROUTINE_INTERVALS, Handler, Step, \
    standard_specs, stepwise
from core.scheduler import Environment, JobContext, Scheduler
from core.store import health, turn_learning, vectors
from core.store.db import Database
from core.store.jobs import OPEN_STATES, Job, list_jobs
from core.words import counted

SYSTEM_IDLE_TTL = 1.0  # seconds between ioreg runs
POWER_TTL = 60.0  # seconds between pmset runs
LEARN_BATCH = 8  # waiting chat turns learned between two checkpoints (one or two model calls each)
WAITING_COUNTED = 10_000  # how many waiting turns a reflection job looks at (and counts in its progress)


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
    """Idle = the most recent of the app's own input and (on macOS) the system's; power from pmset or sysfs; a
    running job keeps a Mac on power from idle sleep (caffeinate)."""
    from app.services.platform import keep_awake, on_ac_power, system_idle_seconds
    # ioreg and pmset are subprocesses, and a running job asks several times a second whether to yield: once a
    # second for idle time is enough (the app's own input is seen at once), once a minute for the power source.
    system_idle = CachedProbe(system_idle_seconds, ttl=SYSTEM_IDLE_TTL)
    probes = [system_idle] + ([activity.idle_seconds] if activity is not None else [])
    return Environment(clock=db.clock, idle_seconds=combined_idle(*probes),
                       on_ac_power=CachedProbe(on_ac_power, ttl=POWER_TTL), model_gate=model_gate or ModelGate(),
                       keep_awake=keep_awake)


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
    """First the turns the chat stored but did not learn from (it was busy, or the app quit first), then the
    conversations. One job for both: they need the same model, and reflection reads the facts learning keeps.
    Each handler imports what it runs when it runs: `engram jobs` and `finetune status` build the scheduler only
    to list or recover jobs (core.assistant alone takes 0.19 s CPU to import)."""
    def step(payload: Mapping[str, Any], state: Mapping[str, Any], stop: Callable[[], bool]) -> Step:
        from core.assistant import pending_learning
        from core.memory import reflect
        state = {"learned": 0, "facts": 0, "left_out": 0, "done": 0, "retry": 0, "given_up": 0, "problem": "",
                 **state}
        if "todo" not in state:
            state["todo"] = ([payload["session_id"]] if "session_id" in payload
                             else reflect.ended_sessions(db, services.settings))
        waiting = pending_learning(db, limit=WAITING_COUNTED)
        if waiting:
            return _learn_waiting(services, db, waiting, state, stop)
        todo = list(state["todo"])
        if not todo:
            return Step(state, 1.0, _reflection_summary(state), done=True)
        model = structured_model(services, required=True)  # loaded only when there is a session to review
        report = reflect.reflect_session(db, services.settings, model, int(todo[0]), embedder=services.embedder,
                                         stop=stop)  # a returning user's reply does not wait for the model
        state = {**state, "todo": todo[1:], "done": state["done"] + 1}
        message = (f"conversation {report.session_id}: {counted(len(report.added), 'new hypothesis')}, "
                   f"{len(report.strengthened)} strengthened")
        finished = not state["todo"]
        return Step(state, _reflection_fraction(state, 0),
                    message + (f"; {_reflection_summary(state)}" if finished else ""), done=finished)

    def handler(ctx: JobContext) -> Optional[str]:
        return stepwise(lambda payload, state: step(payload, state, ctx.should_yield))(ctx)
    return handler


def _learn_waiting(services: Any, db: Database, waiting: Sequence[int], state: dict[str, Any],
                   stop: Callable[[], bool]) -> Step:
    """One batch of the turns the chat left waiting, oldest first. It gives way as the chat does: asked before
    each turn's extraction, a returning user leaves that turn waiting (and stops the batch); the store marks each
    learned turn, so a resumed job starts with those still waiting. A turn whose learning raises does not hold up
    the others: the store counts it, and it waits for a later pass or is given up (core.store.turn_learning)."""
    from core.assistant import TAKEN, Assistant
    model = structured_model(services, required=True)
    assistant = Assistant(db, services.embedder,
                          None,  # type: ignore[arg-type]  # learns, never answers: learn() reads no chat model
                          model, services.settings)
    learned = facts = left_out = handled = 0
    for episode_id in waiting[:LEARN_BATCH]:
        try:
            report = assistant.learn(assistant.stored_turn(episode_id), busy=stop)
        except Exception as exc:  # noqa: BLE001 - the turn's failure, counted by the store; the batch goes on
            if isinstance(exc, turn_learning.TRANSIENT) or health.is_corruption(exc):
                raise  # the store's, not the turn's: the scheduler retries the job later, or stops
            state = _turn_failed(db, episode_id, exc, state)
            handled += 1
            continue
        if report.skipped and report.skipped != TAKEN:  # a returning user: the rest wait
            break
        handled += 1  # learned, or learned meanwhile by the chat or another process
        if not report.skipped:
            learned, facts, left_out = learned + 1, facts + len(report.facts), left_out + len(report.dropped)
    state = {**state, "learned": state["learned"] + learned, "facts": state["facts"] + facts,
             "left_out": state["left_out"] + left_out}
    remaining = len(waiting) - handled
    total = state["learned"] + remaining
    message = (f"learned {state['learned']} of {counted(total, 'turn')} the chat left for later: "
               f"{counted(state['facts'], 'fact')} kept, {state['left_out']} left out")
    trouble = _learning_trouble(state)
    return Step(state, _reflection_fraction(state, remaining), message + (f"; {trouble}" if trouble else ""))


def _turn_failed(db: Database, episode_id: int, exc: Exception, state: dict[str, Any]) -> dict[str, Any]:
    key = "given_up" if turn_learning.given_up(db, [episode_id]) else "retry"
    return {**state, key: state[key] + 1, "problem": f"{type(exc).__name__}: {exc}"[:160]}


def _learning_trouble(state: Mapping[str, Any]) -> str:
    """Turns whose learning raised, in the job's message (the Jobs panel and `engram jobs list` show it)."""
    parts = []
    if state["retry"]:
        parts.append(f"{counted(state['retry'], 'turn')} could not be learned, tried again later")
    if state["given_up"]:
        parts.append(f"gave up learning {counted(state['given_up'], 'turn')} after "
                     f"{turn_learning.MAX_ATTEMPTS} tries")
    return f"{'; '.join(parts)} ({state['problem']})" if parts else ""


def _reflection_fraction(state: Mapping[str, Any], waiting: int) -> float:
    """Turns learned and conversations reviewed, out of all that were or are waiting."""
    finished = state["learned"] + state["retry"] + state["given_up"] + state["done"]
    total = finished + waiting + len(state["todo"])
    return finished / total if total else 1.0


def _reflection_summary(state: Mapping[str, Any]) -> str:
    learned = (f"learned {counted(state['learned'], 'turn')} the chat left for later "
               f"({counted(state['facts'], 'fact')} kept); " if state["learned"] else "")
    trouble = _learning_trouble(state)
    return f"{learned}{trouble + '; ' if trouble else ''}reflected on {counted(state['done'], 'conversation')}"


def consolidation_handler(services: Any, db: Database) -> Handler:
    def handler(ctx: JobContext) -> Optional[str]:
        from core.memory.consolidate import Consolidator
        model = structured_model(services, required=False)
        consolidator = Consolidator(db, services.settings, services.embedder, model, stop=ctx.should_yield)
        return stepwise(consolidator.step)(ctx)
    return handler


def forgetting_handler(services: Any, db: Database) -> Handler:
    """The daily pass, then, a step at a time (the job yields between them when the user comes back), the older
    turns' sentence vectors a store from before schema 9 still lacks; the vector index's upkeep after each."""
    def step(payload: Mapping[str, Any], state: Mapping[str, Any]) -> Step:
        from core.memory import forget
        from core.memory.index import index_sentence_backlog
        if "archived" not in state:
            result = forget.forgetting_pass(db, services.settings, embedder=services.embedder)
            state = {"archived": len(result.archived), "compacted": len(result.compacted), "sentences": 0,
                     "message": f"archived {counted(len(result.archived), 'fact')}, compacted "
                                f"{counted(len(result.compacted), 'turn')} into "
                                f"{counted(len(result.summaries), 'summary')}"}
        else:
            state = {**state, "sentences": state.get("sentences", 0) + index_sentence_backlog(db, services.embedder)}
        vectors.upkeep(db)  # idle-time upkeep of recall's vector index: clusters, packs
        given, left = state["sentences"], sentence_backlog(db)
        message = state.get("message", "") + (f"; gave {counted(given, 'older turn')} their sentence vectors"
                                               if given else "")
        return Step(state, 1.0 if not left else 0.5 + 0.5 * given / (given + left), message, done=not left)
    return stepwise(step)


def sentence_backlog(db: Database) -> int:
    """How many turns written before schema 9 still wait for their sentence vectors."""
    from core.store import sentences
    below = sentences.backfill_below(db)
    if below is None:
        return 0
    return int(db.scalar("SELECT count(*) FROM episodes WHERE id < ?", (below,)) or 0)


def finetune_handler(services: Any, db: Database) -> Handler:
    def handler(ctx: JobContext) -> Optional[str]:
        from models.finetune import FineTuner
        tuner = FineTuner(db, finetune_base_folder(services), services.data_dir / "adapters",
                          make_room=lambda: make_room_for_training(services))
        return tuner(ctx)
    return handler


def make_room_for_training(services: Any, *, budget: Any = None) -> str:
    """Before a fine-tune's worker loads its own copy of the model: keep the chat model loaded if both fit, unload
    it if only the training fits (the next reply loads it again), refuse in words if not even that (issue 36.9).
    Returns models.registry's verdict."""
    from app.services.platform import this_machine
    from models.budget import budget_words, memory_budget
    from models.finetune import TrainConfig
    from models.registry import GB, TOO_BIG, WITHOUT_CHAT, finetune_fit, need_for_folder, training_need_for_folder
    folder = services.chat_model_folder()
    config = TrainConfig()
    train = training_need_for_folder(folder, trained_layers=config.num_layers, batch_size=config.batch_size)
    chat = need_for_folder(folder) if services.chat_loaded() else 0
    budget = budget or memory_budget()
    verdict = finetune_fit(chat, train, budget.bytes)
    if verdict == TOO_BIG:
        raise ModelError(f"Fine-tuning {folder.name} needs about {train / GB:.1f} GB, more than "
                         f"{budget_words(budget, this_machine())} allows; a smaller chat model can be fine-tuned.")
    if verdict == WITHOUT_CHAT:
        services.unload_chat()
    return verdict


def queue_reflection(scheduler: Scheduler, session_id: int) -> Job:
    """A session ended: reflect on it when the user is away."""
    return scheduler.enqueue(REFLECTION, payload={"session_id": int(session_id)})


def plan(scheduler: Scheduler, settings: Settings,
         intervals: Mapping[str, float] = ROUTINE_INTERVALS) -> list[Job]:
    """Queue what is due under the settings in force now: the routine kinds, and a reflection when ended (or
    long quiet) sessions or chat turns not learned yet wait for one.

    Only what could do something: nothing while the store is empty, and no job that uses the chat model
    before one is chosen (a fresh install showed fine-tune and consolidation queued for a model it did not have).
    """
    from core.assistant import pending_learning
    from core.memory.reflect import ended_sessions
    scheduler.settings = settings.scheduler  # idle minutes and quiet hours as saved now (Settings, a CLI)
    if not _has_anything(scheduler.db):
        return []
    runnable = {kind: every for kind, every in intervals.items() if _can_run(scheduler, settings, kind)}
    added = scheduler.plan_routine(runnable)
    waiting = ended_sessions(scheduler.db, settings) or pending_learning(scheduler.db, limit=1)
    if _can_run(scheduler, settings, REFLECTION) and waiting and not list_jobs(
            scheduler.db, states=OPEN_STATES, kind=REFLECTION, limit=1):
        added.append(scheduler.enqueue(REFLECTION))
    return added


def _can_run(scheduler: Scheduler, settings: Settings, kind: str) -> bool:
    spec = scheduler.specs.get(kind)
    if kind == FINETUNE and spec is not None and finetune_not_ready(scheduler):
        return False  # too little to learn how the user likes answers: the Jobs panel says why
    return spec is not None and (bool(settings.chat_model) or not spec.uses_model)


def finetune_not_ready(scheduler: Scheduler) -> str:
    """why_not_ready, asked again only when the store changed in a way it reads (the loop plans every few seconds)."""
    key = readiness_key(scheduler.db)
    cached = scheduler.memo.get("finetune_readiness")
    if cached is None or cached[0] != key:
        cached = scheduler.memo["finetune_readiness"] = (key, why_not_ready(scheduler.db))
    return cached[1]


def _has_anything(db: Database) -> bool:
    return bool(db.scalar("SELECT EXISTS(SELECT 1 FROM memories) OR EXISTS(SELECT 1 FROM episodes)"))


KINDS: tuple[str, ...] = (REFLECTION, CONSOLIDATION, FORGETTING, FINETUNE)
