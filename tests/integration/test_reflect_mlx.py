"""Reflection through the real MLX engine on the tiny model with structured generation.

The tiny model's weights are random, so the content is noise; the test proves that every step's object is
valid against its schema, that none of the noise is kept (no hypothesis, no goal opened or closed: issue 17),
and that what was decided before — a rejected hypothesis, a memory's history — is kept."""
from __future__ import annotations

import jsonschema

from core.config import ReflectionSettings, Settings
from core.memory import reflect
from core.prompts import reflect as prompt
from core.store import goals, history, hypotheses
from core.store.episodes import add_episode
from core.store.memories import add_memory
from core.store.sessions import create_session, end_session
from models.structured import StructuredGenerator


class Recording:
    """Wraps the real generator and keeps each (schema, reply) for validation."""

    def __init__(self, inner):
        self.inner, self.seen = inner, []

    def generate_json(self, messages, schema, *, max_tokens=512, stop=None):
        reply = self.inner.generate_json(messages, schema, max_tokens=max_tokens, stop=stop)
        self.seen.append((schema, reply))
        return reply


def test_reflection_on_the_tiny_model_keeps_no_junk_and_keeps_history(db, tiny_engine, embedder):
    """Issue 17: the tiny random model proposes gibberish hypotheses and goals and closes goals; none of it is kept,
    every proposal is in the report with its reason, and what was decided before is untouched."""
    # the tiny model's window is 2,048 tokens of a character-level tokenizer: one short search at most
    settings = Settings().replace(reflection=ReflectionSettings(max_tool_calls=1, search_results=2))
    memory = add_memory(db, "The user lives in Lisbon.")
    rejected = hypotheses.add_hypothesis(db, "style", "Likes long answers", 0.3)
    hypotheses.decide(db, rejected, "rejected")
    question = goals.open_goal(db, "Where do you work now?")
    before_history = history.history(db, memory)
    proposed = dropped = 0
    for seed in range(6):
        session = create_session(db, f"chat {seed}")
        for text in ("I prefer short answers", "I like hiking on weekends", "I work as a nurse"):
            add_episode(db, text, "Sure.", session_id=session)
        end_session(db, session)
        model = Recording(StructuredGenerator(tiny_engine, temperature=1.0, seed=seed))
        report = reflect.reflect_session(db, settings, model, session, embedder=embedder)
        for schema, reply in model.seen:
            jsonschema.validate(reply, schema)
        assert model.seen and model.seen[0][0]["title"] == "reflection_step"
        final = model.seen[-1][1]
        proposed += sum(len(final[k]) for k in ("hypotheses", "open_goals", "closed_goals"))
        dropped += len(report.dropped)
        assert report.added == report.strengthened == report.reopened == [] and report.goals_opened == []
        assert report.goals_closed == [] and all(why for _, _, why in report.dropped)
    assert proposed > 0 and dropped == proposed  # the model did propose things: each was turned down
    assert hypotheses.list_hypotheses(db) == [hypotheses.get_hypothesis(db, rejected)]
    assert [g.id for g in goals.list_goals(db)] == [question] and goals.get_goal(db, question).status == "open"
    assert history.history(db, memory) == before_history
    assert reflect.pending_sessions(db) == []


def test_instructions_are_written_by_the_tiny_model_from_the_confirmed_profile(db, tiny_engine):
    settings = Settings()
    episode = add_episode(db, "Use metric units")
    hypotheses.decide(db, hypotheses.add_hypothesis(db, "preferences", "Wants metric units", 0.5, [episode]),
                      "confirmed")
    model = Recording(StructuredGenerator(tiny_engine, temperature=1.0, seed=1))
    text = reflect.write_instructions(db, settings, model)
    (schema, reply), = model.seen
    jsonschema.validate(reply, schema)
    assert schema == prompt.instructions_schema(settings.reflection.max_instructions_chars)
    assert text == reflect.session_instructions(db)
    assert text == reply["instructions"].strip() or "Wants metric units" in text
