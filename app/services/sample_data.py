"""A seeded sample data folder: four months of a fictional user's life with Engram, written through the real
store APIs and the real embedder, for screenshots and demos.

Conversations and facts are dated in the past (the store's clock is moved by hand while writing), so the
consolidation and forgetting jobs that run at the end (the real scheduler and handlers) really summarise and
forget the stale ones. It holds memories with history (a move that closed an old fact, pins, protection, an
edit), Hebbian edges from memories used together, hypotheses with evidence (open, confirmed, rejected),
learning goals, finished and queued jobs, and two adapter versions with gate scores (sample rows: their folders
hold no weights, and the folder has no chat model to use them with).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.services.sample_chat import add_practice_conversation
from core.config import DB_FILENAME, load_settings, save_settings
from core.errors import InvalidInput
from core.finetune import adapters as versions
from core.jobs import CONSOLIDATION, FINETUNE, FORGETTING
from core.memory import hebbian
from core.memory.index import index_episodes
from core.memory.manage import MemoryManager
from core.store import edges, goals, hypotheses, turns
from core.store import jobs as job_store
from core.scheduler import Environment
from core.store.db import open_db
from core.store.episodes import add_episode
from core.store.sessions import create_session

DAY = 86400.0

# (days ago, session title, [(what the user said, what Engram answered)])
CONVERSATIONS = (
    (118, "Moving plans", [("I'm moving from Boston to Denver next month for a new job.",
                            "Congratulations! Do you want a checklist for the move?"),
                           ("Yes please, and remind me the lease in Boston ends on the 30th.",
                            "Noted: the Boston lease ends on the 30th.")]),
    (96, "Parking app", [("Which parking app works in Cambridge?", "ParkBoston covers Cambridge too.")]),
    (74, "Sourdough", [("My sourdough starter smells like acetone, is it dead?",
                        "It is hungry, not dead: feed it twice a day for a few days.")]),
    (47, "Doctor visit", [("The doctor confirmed I'm allergic to penicillin.",
                           "I will remember that; it matters whenever medicine comes up."),
                          ("Keep answers short please, I read them on my phone.", "Understood.")]),
    (33, "Climbing", [("Went bouldering at Movement RiNo again, sent my first V4!",
                       "Well done! That is a big step."),
                      ("Can you suggest finger-strength exercises?", "Hangboard repeaters, three sets of six.")]),
    (19, "Work", [("My manager Priya wants the quarterly report on Friday.",
                   "Shall I outline the report with you?"),
                  ("Just bullet points, no essay.", "Here are five bullets.")]),
    (9, "Cello", [("I started cello lessons; my teacher is called Ana.", "Lovely. How often are the lessons?"),
                  ("Tuesdays at six.", "Noted: cello with Ana on Tuesdays at six.")]),
    (2, "Weekend", [("Planning a hike near Boulder on Saturday, any trail ideas?",
                     "Royal Arch is a good half-day hike."),
                    ("Short answers, please.", "Royal Arch, 3.4 miles, steep.")]),
)

# (days ago, statement, (subject, relation, object), options)
FACTS: tuple[tuple[int, str, tuple[str, str, str], dict[str, Any]], ...] = (
    (118, "User lives in Boston", ("user", "lives_in", "Boston"), {}),
    (118, "User's Boston lease ends on the 30th", ("user", "lease_ends", "the 30th"), {}),
    (96, "User asked which parking app works in Cambridge", ("user", "asked_about", "parking app"), {}),
    (74, "User keeps a sourdough starter", ("user", "keeps", "sourdough starter"), {}),
    (74, "User's sourdough starter smelled of acetone", ("starter", "smelled_of", "acetone"), {}),
    (47, "User is allergic to penicillin", ("user", "allergic_to", "penicillin"), {"critical": True,
                                                                                    "pinned": True}),
    (47, "User prefers short answers", ("user", "prefers", "short answers"), {"confidence": 0.85}),
    (33, "User climbs at Movement RiNo", ("user", "climbs_at", "Movement RiNo"), {}),
    (33, "User sent a V4 boulder problem", ("user", "achieved", "V4"), {}),
    (33, "User trains finger strength on a hangboard", ("user", "trains", "hangboard"), {}),
    (19, "User's manager is Priya", ("user", "manager", "Priya"), {"protected": True}),
    (19, "User's quarterly report is due on Friday", ("user", "deadline", "quarterly report"), {}),
    (9, "User takes cello lessons", ("user", "learns", "cello"), {}),
    (9, "User's cello teacher is Ana", ("user", "teacher", "Ana"), {}),
    (9, "User's cello lesson is on Tuesdays at six", ("user", "lesson_time", "Tuesdays at six"), {}),
    (2, "User plans a hike near Boulder on Saturday", ("user", "plans", "hike near Boulder"), {}),
    (2, "User likes hiking", ("user", "likes", "hiking"), {"confidence": 0.8}),
)

# Replies that used these memories together and proved useful, (days ago, statements, how many days in a row):
# each use touches them and strengthens the Hebbian edges between them, as a real turn does.
USED_TOGETHER = (
    (25, ("User climbs at Movement RiNo", "User sent a V4 boulder problem",
          "User trains finger strength on a hangboard"), 2),
    (6, ("User takes cello lessons", "User's cello teacher is Ana", "User's cello lesson is on Tuesdays at six"), 2),
    (2, ("User plans a hike near Boulder on Saturday", "User likes hiking", "User lives in Denver"), 1),
    (15, ("User's manager is Priya", "User's quarterly report is due on Friday"), 1),
    (40, ("User is allergic to penicillin", "User prefers short answers"), 1),
    (70, ("User keeps a sourdough starter", "User's sourdough starter smelled of acetone"), 1),
)

# The memories shown under a stored reply, as its chips: (session title, turn number, statements in context order).
REPLY_USES = (("Weekend", 0, ("User plans a hike near Boulder on Saturday", "User likes hiking",
                              "User lives in Denver")),
              ("Weekend", 1, ("User prefers short answers", "User plans a hike near Boulder on Saturday")),
              ("Cello", 1, ("User takes cello lessons", "User's cello teacher is Ana")))

# (dimension, claim, confidence, evidence as (session title, turn), status)
HYPOTHESES = (("style", "Prefers short, direct answers", 0.86,
               (("Doctor visit", 1), ("Work", 1), ("Weekend", 1)), "confirmed"),
              ("interests", "Enjoys climbing and outdoor sport", 0.72,
               (("Climbing", 0), ("Climbing", 1), ("Weekend", 0)), "open"),
              ("interests", "Is learning a musical instrument", 0.45, (("Cello", 0), ("Cello", 1)), "open"),
              ("routine", "Reads Engram's answers mostly on a phone", 0.58, (("Doctor visit", 1),), "open"),
              ("work", "Works in finance", 0.3, (("Work", 0),), "rejected"))

GOALS = (("Which climbing grade are you working towards?", "climbing came up in two sessions", None),
         ("Do you want reminders before cello lessons?", "a weekly lesson time was mentioned", None),
         ("Did the move to Denver go well?", "the move was planned months ago", "Yes, settled in since May"))


@dataclass
class SampleClock:
    """The store's clock while seeding: set by hand to the moment being written."""
    now: float

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class SampleSummary:
    folder: Path
    memories: int
    episodes: int
    hypotheses: int
    forgotten: int


def build_sample_data(folder: Path | str, embedder: Any, *, now: float | None = None) -> SampleSummary:
    """Write the sample store into an empty folder (never over an existing store)."""
    folder = Path(folder)
    if (folder / DB_FILENAME).exists():
        raise InvalidInput(f"{folder} already holds an Engram store; sample data goes into a new folder")
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time() if now is None else now
    save_settings(load_settings(folder), folder)
    clock = SampleClock(now)
    db = open_db(folder / DB_FILENAME, clock=clock)
    try:
        sessions = _conversations(db, embedder, clock, now)
        ids = _facts(db, embedder, clock, now, sessions)
        _history(db, embedder, clock, now, ids)
        settings = load_settings(folder)
        _uses(db, clock, now, ids, settings)
        _reply_uses(db, sessions, ids)
        _beliefs(db, clock, now, sessions)
        add_practice_conversation(db, embedder, clock, now, ids)  # the chat's controls under its turns
        _last_night(db, embedder, folder, clock, now)
        _queue_and_adapters(db, clock, now)
        counts = [db.scalar(f"SELECT count(*) FROM {t}")
                  for t in ("memories", "episodes", "hypotheses", "forgetting_events")]
    finally:
        db.close()
    return SampleSummary(folder, *counts)


def _conversations(db: Any, embedder: Any, clock: SampleClock, now: float) -> dict[str, list[int]]:
    sessions: dict[str, list[int]] = {}
    for days_ago, title, exchanges in CONVERSATIONS:
        clock.now = now - days_ago * DAY
        session = create_session(db, title)
        sessions[title] = []
        for n, (said, answer) in enumerate(exchanges):
            sessions[title].append(add_episode(db, said, answer, session_id=session,
                                               created_at=clock.now + n * 90))
    index_episodes(db, embedder, [e for ids in sessions.values() for e in ids])
    return sessions


def _facts(db: Any, embedder: Any, clock: SampleClock, now: float,
           sessions: dict[str, list[int]]) -> dict[str, int]:
    manager = MemoryManager(db, embedder)
    by_day = {days: ids for (days, _title, _turns), ids in zip(CONVERSATIONS, sessions.values())}
    ids: dict[str, int] = {}
    for days_ago, statement, (subject, relation, obj), options in FACTS:
        clock.now = now - days_ago * DAY + 600
        memory = manager.add(statement, subject=subject, relation=relation, object=obj,
                             source_episode_ids=by_day.get(days_ago, []), reason="learned in conversation",
                             **options)
        ids[statement] = memory.id
    return ids


def _history(db: Any, embedder: Any, clock: SampleClock, now: float, ids: dict[str, int]) -> None:
    """The move closed the Boston fact; a fact was reworded; a memory was pinned by hand."""
    manager = MemoryManager(db, embedder)
    clock.now = now - 88 * DAY
    denver = manager.add("User lives in Denver", subject="user", relation="lives_in", object="Denver",
                         reason="the user moved", importance=0.6)
    ids["User lives in Denver"] = denver.id
    manager.invalidate(ids["User lives in Boston"], superseded_by=denver.id, reason="moved to Denver")
    edges.set_edge(db, ids["User lives in Boston"], denver.id, "supersedes", 1.0)
    clock.now = now - 30 * DAY
    manager.edit(ids["User climbs at Movement RiNo"], statement="User boulders at Movement RiNo in Denver",
                 reason="the user corrected it")
    clock.now = now - 8 * DAY
    manager.pin(ids["User's cello teacher is Ana"], reason="pinned in the Memories panel")


def _uses(db: Any, clock: SampleClock, now: float, ids: dict[str, int], settings: Any) -> None:
    for days_ago, statements, times in USED_TOGETHER:
        used = [ids[s] for s in statements]
        for n in range(times):
            clock.now = now - (days_ago - n) * DAY
            hebbian.touch(db, used)
            hebbian.reinforce(db, used, settings.hebbian)


def _reply_uses(db: Any, sessions: dict[str, list[int]], ids: dict[str, int]) -> None:
    for title, turn, statements in REPLY_USES:
        used = [(ids[statement], 0.8 - 0.1 * rank, False) for rank, statement in enumerate(statements)]
        turns.record_used(db, sessions[title][turn], used)


def _beliefs(db: Any, clock: SampleClock, now: float, sessions: dict[str, list[int]]) -> None:
    clock.now = now - 1 * DAY
    for dimension, claim, confidence, turns_cited, status in HYPOTHESES:
        evidence = [sessions[title][turn] for title, turn in turns_cited]
        hypothesis = hypotheses.add_hypothesis(db, dimension, claim, confidence, evidence)
        if status != "open":
            hypotheses.decide(db, hypothesis, status)
    for question, reason, answer in GOALS:
        goal = goals.open_goal(db, question, reason=reason)
        if answer:
            goals.close_goal(db, goal, answer)


def _last_night(db: Any, embedder: Any, folder: Path, clock: SampleClock, now: float) -> None:
    """The real consolidation and forgetting jobs, run through the real scheduler and handlers (without a chat
    model, consolidation writes its deterministic summaries)."""
    from app.services.wiring import Services  # the app's wiring of the real handlers
    services = Services(settings=load_settings(folder), data_dir=folder, _embedder=embedder)
    scheduler = services.scheduler(db=db, env=Environment(clock=clock))
    for kind, hours_ago in ((CONSOLIDATION, 26), (FORGETTING, 0)):
        clock.now = now - hours_ago * 3600
        final = scheduler.run_job(scheduler.enqueue(kind, run_now=True).id)
        if final is None or final.state != "done":
            raise RuntimeError(f"the sample's {kind} job did not finish: {final}")


def _queue_and_adapters(db: Any, clock: SampleClock, now: float) -> None:
    """A fine-tune queued for tonight, and two earlier fine-tunes: one adapter passed the gate, one did not."""
    clock.now = now
    job_store.enqueue(db, FINETUNE)  # "Fine-tune tonight"
    for days_ago, probes, ppl, status in ((12, (2.41, 1.62), (18.9, 19.3), "accepted"),
                                          (5, (1.62, 1.58), (19.3, 22.8), "rejected")):
        clock.now = now - days_ago * DAY
        metrics = {"baseline": {"probe_loss": probes[0], "general_ppl": ppl[0]},
                   "candidate": {"probe_loss": probes[1], "general_ppl": ppl[1]},
                   "gate": {"accept": status == "accepted", "reasons": []}}
        adapter = versions.record_adapter(db, name=f"sample adapter {days_ago} days ago", base_model="(sample)",
                                          path=f"(sample)/adapter-{days_ago}", status=status, metrics=metrics,
                                          config={}, sources={})
        if status == "accepted":
            versions.activate(db, adapter.id)
