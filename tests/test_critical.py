"""Critical facts: canonical relations, the intent classifier, and the facts an intent puts first."""
from __future__ import annotations

import pytest

from core.memory.critical import (IntentClassifier, canonical_relation, critical_memory_ids, is_critical,
                                  relations_for)
from core.store.memories import add_memory, invalidate_memory


@pytest.mark.parametrize("raw, name", [("is allergic to", "allergy"), ("Allergy", "allergy"),
                                       ("takes_medication", "medication"), ("diagnosed with", "condition"),
                                       ("is vegetarian", "diet"), ("must not", "hard_constraint"),
                                       ("lives in", "lives_in"), ("", "")])
def test_relations_are_canonical(raw, name):
    assert canonical_relation(raw) == name


def test_which_relations_are_critical():
    assert is_critical("allergic_to") and is_critical("medication") and not is_critical("likes")


def test_keywords_map_a_request_to_intents_and_relations():
    classifier = IntentClassifier()
    names = [i.name for i in classifier.classify("Which antibiotic should I take for this infection?")]
    assert names == ["medication"]
    assert "allergy" in relations_for(classifier.classify("Book me a flight to Rome"))
    assert classifier.classify("What is the capital of France?") == []


def test_embeddings_catch_a_request_without_keywords(embedder):
    classifier = IntentClassifier(embedder)
    assert classifier.classify("What is the capital of France?") == []
    assert [i.name for i in classifier.classify("We are going to Japan in April, what should we see?")] == ["travel"]
    assert [i.name for i in classifier.classify("I have a fever and a rash")] == ["medication"]
    assert classifier.classify("Write a poem about the sea") == []


def test_critical_memories_of_the_relations_active_only_critical_first(db):
    old = add_memory(db, "The user is allergic to peanuts.", relation="allergy", critical=True)
    soft = add_memory(db, "The user has a mild pollen allergy.", relation="allergy", confidence=0.9)
    hard = add_memory(db, "The user is allergic to penicillin.", relation="allergy", critical=True, confidence=0.95)
    add_memory(db, "The user likes tea.", relation="likes")
    invalidate_memory(db, old)
    assert critical_memory_ids(db, ["allergy", "medication"], 10) == [hard, soft]
    assert critical_memory_ids(db, ["allergy"], 1) == [hard]
    assert critical_memory_ids(db, [], 10) == []
