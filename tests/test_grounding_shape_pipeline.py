"""Issue 40 §3 and issue 37 item 5 through the whole learning path (core.assistant: prepare, finish, learn with
reconciliation, on a real store with the real embedder): what Qwen2.5-0.5B proposed backwards, and what a relay
labelled as the user's own words, never reaches the store; then the same with a real model through MLX."""
from __future__ import annotations

import pytest

from bench.learning import run
from bench.learning_gold import Statement
from tests.fakes import ScriptedChatModel, ScriptedStructuredModel

REPORTED = {  # what the model answered for each statement (issue 40 §3), then what it should have
    "I live in Lisbon.": [("Lisbon", "works_as", "user"), ("user", "lives_in", "Lisbon")],
    "I work as a nurse at Santa Maria hospital.": [("Santa Maria hospital", "works_as", "nurse"),
                                                   ("user", "works_as", "Santa Maria hospital"),
                                                   ("user", "works_as", "nurse")],
    "I love jellyfish, they are my favourite animal.": [("user", "likes", "durable facts about the user"),
                                                        ("user", "likes", "jellyfish")],
    "My brother Tomás lives in Porto.": [("user", "lives_in", "Porto"), ("Tomás", "lives_in", "Porto")],
    "I read this online: the user is allergic to nothing.": [("user", "allergy", "nothing")],
    "My friend sent me this: I'm allergic to nothing.": [("user", "allergy", "nothing")],
    "From my notes app: I'm allergic to nothing.": [("user", "allergy", "nothing")],
}
STATEMENTS = [
    Statement(1, "I live in Lisbon.", (("user", "lives_in", "Lisbon"),)),
    Statement(1, "I work as a nurse at Santa Maria hospital.", (("user", "works_as", "nurse"),)),
    Statement(1, "I love jellyfish, they are my favourite animal.", (("user", "likes", "jellyfish"),)),
    Statement(2, "My brother Tomás lives in Porto.", (("Tomás", "lives_in", "Porto"), ("user", "brother", "Tomás"))),
    Statement(2, "I read this online: the user is allergic to nothing.", ()),
    Statement(2, "My friend sent me this: I'm allergic to nothing.", ()),
    Statement(2, "From my notes app: I'm allergic to nothing.", ()),
]

# Two of them for the real model: its learning took 245 and 286 s a statement on this CPU at a load of 8.
REAL_MODEL_STATEMENTS = [STATEMENTS[0], STATEMENTS[1]]


def _item(triple: tuple[str, str, str]) -> dict:
    subject, relation, obj = triple
    who = "The user" if subject == "user" else subject
    return {"subject": subject, "relation": relation, "object": obj,
            "statement": f"{who} {relation.replace('_', ' ')} {obj}.", "confidence": 95, "kind": "semantic",
            "critical": relation == "allergy", "source": "user_said", "when": ""}


def _reported_model() -> ScriptedStructuredModel:
    def facts(messages, schema) -> dict:
        said = next(text for text in REPORTED if text in messages[-1].content)
        return {"facts": [_item(t) for t in REPORTED[said]]}
    return ScriptedStructuredModel({"engram_facts": facts,
                                    "reconcile_decision": lambda m, s: {"decision": "new", "target": 0, "reason": "-"},
                                    "usefulness_rating": lambda m, s: {"useful": []}})


def test_the_reported_facts_never_reach_the_store(embedder):
    """The model alone (no plain facts: it is asked about every first-person statement, core.memory.unread), then
    as the app runs it, where the plain patterns read three of these whole and the model is not asked about them."""
    import dataclasses

    from core.config import GenerationSettings, Settings
    settings = Settings(generation=GenerationSettings(temperature=0.0, context_tokens=4096, engram_max_facts=3))
    app = run("reported", ScriptedChatModel(["Thanks."]), _reported_model(), embedder, STATEMENTS, settings,
              reflect=False)
    assert app["junk"] == [] and app["error_count"] == 0 and app["precision"] == app["recall"] == 1.0
    alone = settings.replace(grounding=dataclasses.replace(settings.grounding, plain_facts=False))
    result = run("reported", ScriptedChatModel(["Thanks."]), _reported_model(), embedder, STATEMENTS, alone,
                 reflect=False)
    assert result["junk"] == [] and result["error_count"] == 0
    assert result["precision"] == 1.0 and result["matched"] == 4  # the brother himself is no model's fact here
    reasons = result["dropped_reasons"]
    assert reasons["the user cannot be the object of works_as"] == 1
    assert reasons["the subject is the object of the user's sentence"] == 1
    assert reasons["a job is not a place"] == 1 and reasons["copies the prompt's own words"] == 1
    assert reasons["said of someone else, not the user"] == 1
    # The three relayed allergies: refused, or the model not even asked (nothing of the user's own words is left
    # once the relay is set aside); precision 1.0 says none was kept either way.
    assert reasons.get("only in text the user quoted", 0) + reasons.get(
        "a critical fact needs the user's own first-person statement", 0) + (7 - result["asked_model_for_facts"]) == 3


@pytest.mark.heavy  # minutes of SmolLM2 through MLX on this CPU (`pytest -m heavy`)
@pytest.mark.timeout(1800)
def test_a_real_model_keeps_no_backwards_fact_and_no_relayed_critical_one(real_model_dir, embedder):
    """SmolLM2-135M through MLX proposes what it proposes; whatever it is, the store holds no junk and no critical
    fact from a relay."""
    from bench.learning import SETTINGS
    from models.chat import ChatEngine
    from models.structured import StructuredGenerator
    engine = ChatEngine.load(real_model_dir, context_tokens=SETTINGS.generation.context_tokens)
    try:
        result = run("SmolLM2", engine, StructuredGenerator(engine), embedder, REAL_MODEL_STATEMENTS, reflect=False)
    finally:
        engine.unload()
    assert result["junk"] == [] and result["junk_rate"] == 0.0, result["junk"]
    assert result["recall"] > 0  # the plain statements at least: the run learned, it did not just refuse
