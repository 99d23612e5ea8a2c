"""Through the real engine (SmolLM2-135M): a turn the plain patterns read whole, or chit-chat, is learned without a
model call; a turn with words left unread asks the model, and what the person plainly said is kept either way; a
reply that drew on no memory asks for no usefulness rating."""
from __future__ import annotations

import pytest

from core.assistant import Assistant
from core.config import GenerationSettings, Settings
from core.store.sessions import create_session
from models.chat import ChatEngine
from models.structured import StructuredGenerator

SETTINGS = Settings(generation=GenerationSettings(temperature=0.0, context_tokens=2048, engram_max_facts=1))


class _Counting(StructuredGenerator):
    def __init__(self, engine) -> None:
        super().__init__(engine)
        self.titles: list[str] = []

    def generate_json(self, messages, schema, **kwargs):
        self.titles.append(schema.get("title", ""))
        return super().generate_json(messages, schema, **kwargs)


@pytest.mark.slow  # one SmolLM2 extraction (about half a minute on this CPU)
def test_only_a_turn_with_words_left_unread_asks_the_real_model(db, embedder, clock, real_model_dir):
    engine = ChatEngine.load(real_model_dir, context_tokens=SETTINGS.generation.context_tokens)
    try:
        structured = _Counting(engine)
        assistant = Assistant(db, embedder, engine, structured, SETTINGS, clock)
        session = create_session(db, title="unread")
        reports = {}
        for text in ("Good morning!", "I live in Lisbon.", "I work as a nurse at Santa Maria hospital."):
            reports[text] = assistant.learn(assistant.finish(assistant.prepare(session, text), "Noted."))
    finally:
        engine.unload()
    assert not reports["Good morning!"].asked_model and not reports["I live in Lisbon."].asked_model
    assert reports["I work as a nurse at Santa Maria hospital."].asked_model
    assert structured.titles.count("engram_facts") == 1
    assert "usefulness_rating" not in structured.titles  # "Noted." drew on no memory: no rating could count
    assert [(f.subject, f.relation, f.object) for f in reports["I live in Lisbon."].facts] == [
        ("user", "lives_in", "Lisbon")]
    # the job: the plain fact, or the model's own fact naming the same thing (core.memory.said_facts.with_plain_facts)
    assert any("nurse" in f.object for f in reports["I work as a nurse at Santa Maria hospital."].facts)
