"""Thirty simulated days with the scripted model, the real store, MiniLM, recall and the learning loop.

Every day is one conversation through the Assistant (recall → context → answer → episode → engram →
reconcile → rating → Hebbian), reflection when it ends, and a night of consolidation and forgetting.
Day 1 the user lives in Boston, is allergic to penicillin, pins their passport note and mentions a stolen
bike; day 2 asks for concise answers (reflection proposes it; the user rejects it); day 10 they moved to
Denver; 500 unrelated questions fill the month. The user chose aggressive forgetting of conversation
turns in Settings (a 7-day half-life, facts 8x slower, importance counting half, strength "strong"), so old
turns really are compacted within the month.
"""
from __future__ import annotations

import itertools
import re

import pytest

from core.assistant import Assistant
from core.config import ForgettingSettings, Settings
from core.memory import consolidate, forget, reflect
from core.memory.recall import recall
from core.store import history, hypotheses
from core.store.episodes import get_episode
from core.store.memories import get_memory, set_flag
from core.store.sessions import create_session, end_session
from tests.fakes import ScriptedChatModel, ScriptedStructuredModel

pytestmark = pytest.mark.slow

DAYS = 30
UNRELATED_TURNS = 500
FACTS = {  # what the user says → the fact the scripted engram step extracts
    "I live in Boston.": ("lives_in", "Boston", "The user lives in Boston.", False),
    "I'm allergic to penicillin.": ("allergy", "penicillin", "The user is allergic to penicillin.", True),
    "Note: my passport number ends in 4417.": ("passport", "ends in 4417",
                                               "The user's passport number ends in 4417.", False),
    "My bike was stolen at the train station.": ("bike", "stolen", "The user's bike was stolen at the train "
                                                 "station.", False),
    "I moved to Denver last week.": ("lives_in", "Denver", "The user lives in Denver.", False),
}
CONCISE = "Please keep your answers concise."
CLAIM = {"dimension": "communication_style", "claim": "Prefers concise answers"}
TOPICS = ["sourdough bread", "the French revolution", "black holes", "jazz piano", "tomato plants", "chess openings",
          "Roman aqueducts", "knitting socks", "electric cars", "the Python GIL", "whale songs", "board games",
          "watercolour painting", "marathon training", "coffee roasting", "medieval castles", "origami cranes",
          "volcanoes", "bird migration", "film noir", "solar panels", "tea ceremonies", "rock climbing", "haiku"]
ASKS = ["Tell me something interesting about {}.", "What is a good beginner book on {}?",
        "Explain {} in two sentences.", "What are common mistakes with {}?", "Give me a fun fact about {}.",
        "How did {} change over time?", "Why do people enjoy {}?", "What should I know before trying {}?",
        "Summarise the history of {}.", "Compare {} with something similar.", "What tools do I need for {}?",
        "Recommend a documentary about {}.", "Who are famous names in {}?", "Is {} hard to learn?",
        "Describe a typical day involving {}.", "What is the science behind {}?", "Suggest a weekend plan with {}.",
        "What are myths about {}?", "How expensive is {}?", "Write a one-line poem about {}.",
        "What vocabulary goes with {}?", "How do experts practise {}?"]


def unrelated_messages():
    """500 different questions: 22 asks x 24 topics, each pair once."""
    return (ask.format(topic) for ask, topic in itertools.product(ASKS, TOPICS))


def quoted(message: str, label: str) -> str:
    found = re.search(rf"<<<{label}\n(.*?)\n{label}>>>", message, re.S)
    return found.group(1) if found else ""


def engram(messages, schema):
    said = quoted(messages[-1].content, "USER")
    if said not in FACTS:
        return {"facts": []}
    relation, obj, statement, critical = FACTS[said]
    return {"facts": [{"subject": "user", "relation": relation, "object": obj, "statement": statement,
                       "confidence": 90, "kind": "semantic", "critical": critical, "source": "user_said",
                       "when": "last week" if "last week" in said else ""}]}


def reconcile(messages, schema):
    new = quoted(messages[-1].content, "NEW")
    stored = quoted(messages[-1].content, "STORED").splitlines()
    for line in stored:
        number, _, statement = line.partition(". ")
        if "Denver" in new and "Boston" in statement:
            return {"decision": "contradiction", "target": int(number), "reason": "the user moved"}
        if statement == new:
            return {"decision": "duplicate", "target": int(number), "reason": "same fact"}
    return {"decision": "new", "target": 0, "reason": "not the same"}


def reflection(state):
    """Proposes 'prefers concise answers' from any episode it was shown that asks for it; searches first."""
    def respond(messages, schema):
        allowed = schema["properties"]["hypotheses"]["items"]["properties"]["evidence"]["items"]["enum"]
        evidence = [i for i in allowed if i in state["concise"]]
        body = messages[-1].content
        reply = {"action": "finish", "query": "", "hypotheses": [], "open_goals": [], "closed_goals": []}
        if evidence:
            reply["hypotheses"] = [{**CLAIM, "evidence": evidence}]
        elif "<<<SEARCH" not in body:
            reply.update(action="search", query="concise answers")
        return reply
    return respond


@pytest.fixture(scope="module")
def embedder():
    """MiniLM as a lasting process loads it (the window, `engram chat`: where the Assistant talks), onnxruntime here:
    the same vectors as the one-shot numpy encoder (tests/integration/test_mlx_embedder.py), a query ~2x faster."""
    from models.embeddings import load_embedder
    return load_embedder("all-MiniLM-L6-v2", lasting=True)


def test_thirty_days_of_learning_and_forgetting(db, clock, embedder):
    settings = Settings().replace(forgetting=ForgettingSettings(strength="strong", recency_half_life_days=7.0,
                                                                gamma=2.0, fact_half_life_factor=8.0))
    state = {"concise": []}
    structured = ScriptedStructuredModel({"engram_facts": engram, "reconcile_decision": reconcile,
                                          "usefulness_rating": [{"useful": []}], "reflection_step": reflection(state),
                                          "cluster_summary": [{"summary": "A conversation about everyday topics."}],
                                          "session_instructions": [{"instructions": "Be helpful."}]})
    assistant = Assistant(db, embedder, ScriptedChatModel(["Happy to help with that."]), structured, settings, clock)
    special = {1: list(FACTS)[:4], 2: [CONCISE], 5: [CONCISE], 10: [list(FACTS)[4]]}
    chatter = unrelated_messages()
    per_day = -(-UNRELATED_TURNS // DAYS)
    said, unrelated, kept_rejected, forgotten_events = {}, 0, 0, 0
    pinned = hypothesis = None

    for day in range(1, DAYS + 1):
        session = create_session(db, f"day {day}")
        todays = list(special.get(day, []))
        todays += [next(chatter) for _ in range(min(per_day, UNRELATED_TURNS - unrelated))]
        unrelated += len(todays) - len(special.get(day, []))
        for text in todays:
            reply = assistant.reply(session, text)
            said.setdefault(text, reply.record.episode_id)
            if text == CONCISE:
                state["concise"].append(reply.record.episode_id)
            clock.advance(seconds=120)
        if day == 1:
            pinned = next(m for m in _facts(db) if "passport" in m.statement)
            set_flag(db, pinned.id, "pinned", True, reason="the user pinned it")
        end_session(db, session)
        report = reflect.reflect_session(db, settings, structured, session, embedder=embedder)
        kept_rejected += len(report.kept_rejected)
        if day == 2:
            (hypothesis,) = report.added
            hypotheses.decide(db, hypothesis, "rejected")  # the user says no
        clock.advance(seconds=4 * 3600)  # the night
        consolidate.consolidation_pass(db, settings, embedder, structured)
        forgotten_events += len(forget.forgetting_pass(db, settings, embedder=embedder).events)
        assert get_memory(db, pinned.id).is_active, f"the pinned memory was forgotten on day {day}"
        clock.advance(days=1, seconds=-(4 * 3600 + 120 * len(todays)))

    assert unrelated == UNRELATED_TURNS
    assert forgotten_events > 0, _scores(db, settings, said["My bike was stolen at the train station."])

    # Boston → Denver: the old fact closed, both in history, recall answers Denver
    boston = next(m for m in _facts(db, everything=True) if m.statement == "The user lives in Boston.")
    denver = next(m for m in _facts(db, everything=True) if m.statement == "The user lives in Denver.")
    assert denver.is_active, (denver, history.history(db, denver.id))
    assert boston.invalidated_at is not None and boston.superseded_by == denver.id
    assert [h.action for h in history.history(db, boston.id)][:1] == ["create"]
    assert "invalidate" in [h.action for h in history.history(db, boston.id)]
    hits = [h for h in recall(db, embedder, "Which city do I live in?", settings=settings).hits if h.kind == "memory"]
    assert hits[0].id == denver.id and boston.id not in [h.id for h in hits]

    # day 30: an antibiotic request puts the day-1 penicillin allergy first, after 500 unrelated turns
    allergy = next(m for m in _facts(db) if "penicillin" in m.statement)
    prepared = assistant.prepare(None, "I have a sore throat, which antibiotic should I take?")
    assert prepared.used[0].id == allergy.id and prepared.used[0].critical
    assert any("allergic to penicillin" in m.content for m in prepared.messages)

    # the stolen bike's turn was forgotten (compacted); its fact lives on in the summary
    bike_turn = get_episode(db, said["My bike was stolen at the train station."])
    assert bike_turn.forgotten_at is not None, _scores(db, settings, bike_turn.id)
    assert bike_turn.summary_id is not None
    assert "The user's bike was stolen at the train station." in get_memory(db, bike_turn.summary_id).statement

    # the rejected hypothesis stayed rejected, though reflection kept proposing it
    assert hypotheses.get_hypothesis(db, hypothesis).status == "rejected" and kept_rejected >= 2
    assert len(hypotheses.list_hypotheses(db, dimension=CLAIM["dimension"])) == 1
    assert reflect.session_instructions(db) == ""

    # a year on without a word about them: the unpinned day-1 bike fact fades, the pinned passport note stays
    # (under this user's strong dial it may fade within the month already: no reply ever drew on it)
    bike_fact = next(m for m in _facts(db, everything=True)
                     if m.statement == "The user's bike was stolen at the train station.")
    clock.advance(days=365)
    archived = forget.forgetting_pass(db, settings, embedder=embedder).archived
    assert get_memory(db, bike_fact.id).status == "forgotten"
    assert pinned.id not in archived and get_memory(db, pinned.id).is_active
    assert get_memory(db, allergy.id).is_active  # critical: never forgotten either


def _facts(db, everything: bool = False):
    where = "kind = 'semantic'" + ("" if everything else " AND invalidated_at IS NULL AND forgotten_at IS NULL")
    return [get_memory(db, r[0]) for r in db.execute(f"SELECT id FROM memories WHERE {where} ORDER BY id")]


def _scores(db, settings, episode_id):
    """What kept an episode: its retention terms (for a failure message)."""
    table = forget.score_store(db, settings)["episode"]
    rows = [table.row(n) for n in range(len(table.ids)) if table.ids[n] == episode_id]
    return f"episode {episode_id}: {rows or 'not eligible'}; threshold {forget.threshold(settings):.3f}"
