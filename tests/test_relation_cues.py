"""Issue 40 §3: a fact's relation must be said, not only its object. Qwen2.5-0.5B, through bench/learning.py over the
whole gold set, had four facts kept that the user never said — (user, likes, metformin | marathon | cello | green
tea) — from statements of doing or taking something: grounding checked the object's words, and "likes" is a stop
word. Each case is the scripted model's exact output through the real extraction (core.memory.engram), then the
rule itself (core.memory.relation_cues) on sentences of the same kind."""
from __future__ import annotations

import pytest

from core.config import GenerationSettings, Settings
from core.memory.engram import extract_facts
from core.memory.relation_cues import cue_problem
from tests.fakes import ScriptedStructuredModel

NOW = 1_800_000_000.0
SETTINGS = Settings(generation=GenerationSettings(engram_max_facts=8))


def raw(subject: str, relation: str, obj: str, statement: str = "", critical: bool = False) -> dict:
    return {"subject": subject, "relation": relation, "object": obj,
            "statement": statement or f"The user {relation.replace('_', ' ')} {obj}.", "confidence": 90,
            "kind": "semantic", "critical": critical, "source": "user_said", "when": ""}


def extract(user_text: str, *facts: dict):
    model = ScriptedStructuredModel({"engram_facts": [{"facts": list(facts)}]})
    return extract_facts(model, user_text, "Thanks for telling me.", NOW, SETTINGS)


def triples(result) -> list[tuple[str, str, str]]:
    return [(f.subject, f.relation, f.object) for f in result.facts]


@pytest.mark.parametrize("user_text, obj", [
    ("I take metformin every morning.", "metformin"),  # the gold set's four, as Qwen2.5-0.5B answered them
    ("I'm training for a marathon in October.", "marathon"),
    ("I play the cello in an orchestra.", "cello"),
    ("I drink green tea every morning.", "green tea"),
    ("I walk my dog every evening.", "dog"),  # and more of the same kind: doing or taking is not liking
    ("I read the news on the train.", "news"),
    ("I cook pasta on Sundays.", "pasta"),
    ("I take ibuprofen for my back.", "ibuprofen"),
    ("I'm learning Japanese at night school.", "Japanese"),
    ("I love my job and I take metformin every morning.", "metformin"),  # the liking is of another clause
    ("My brother loves football, I watch tennis.", "tennis"),
])
def test_an_object_merely_mentioned_is_not_liked(user_text, obj):
    result = extract(user_text, raw("user", "likes", obj, f"The user likes {obj}."))
    assert triples(result) == [] and result.dropped[0][1] == f"no word of liking: '{obj}'"


@pytest.mark.parametrize("user_text, fact", [
    ("I love jellyfish, they are my favourite animal.", raw("user", "likes", "jellyfish")),
    ("My favourite book is Dune.", raw("user", "likes", "Dune")),
    ("Dune is my favourite book.", raw("user", "favourite_book", "Dune")),
    ("I'm a big fan of jazz.", raw("user", "likes", "jazz")),
    ("I really enjoy hiking and swimming.", raw("user", "enjoys", "swimming")),
    ("Today I started to like tea.", raw("user", "likes", "tea")),
    ("I drink green tea every morning, I love it.", raw("user", "likes", "green tea")),  # the liking refers back
    ("I prefer short answers without emojis.", raw("user", "prefers", "short answers")),
    ("I hate loud music.", raw("user", "dislikes", "loud music")),
    ("I can't stand crowds.", raw("user", "dislikes", "crowds")),
    ("I don't like olives.", raw("user", "dislikes", "olives")),
    ("I'm not a fan of horror films.", raw("user", "dislikes", "horror films")),
])
def test_a_liking_said_in_words_is_kept(user_text, fact):
    result = extract(user_text, fact)
    assert triples(result) == [("user", fact["relation"], fact["object"])], result.dropped


@pytest.mark.parametrize("user_text, fact, why", [
    ("I don't like olives.", raw("user", "likes", "olives"), "the user said the opposite of likes"),
    ("I'm not a fan of horror films.", raw("user", "likes", "horror films"), "the user said the opposite"),
    ("I hate loud music.", raw("user", "likes", "loud music"), "the user said the opposite"),
    ("I prefer short answers without emojis.", raw("user", "prefers", "emojis"), "the user said the opposite"),
    ("I don't hate jazz.", raw("user", "dislikes", "jazz"), "no word of disliking"),
    ("I don't hate jazz.", raw("user", "likes", "jazz"), "no word of liking"),
    ("I love cheese.", raw("user", "dislikes", "cheese"), "the user said the opposite of dislikes"),
])
def test_negation_flips_a_liking_or_refuses_it(user_text, fact, why):
    result = extract(user_text, fact)
    assert triples(result) == [] and result.dropped[0][1].startswith(why)


@pytest.mark.parametrize("user_text, fact", [
    ("I take metformin every morning.", raw("user", "allergy", "metformin", "The user is allergic to metformin.")),
    ("I take metformin every morning.", raw("user", "lives_in", "metformin", "The user lives in metformin.")),
    ("I'm training for a marathon in October.", raw("user", "works_as", "marathon", "The user is a marathon.")),
    ("I take metformin every morning.", raw("user", "plays", "metformin", "The user plays metformin.")),
    ("I'm allergic to peanuts.", raw("user", "medication", "peanuts", "The user takes peanuts.")),
    ("I'm not allergic to peanuts.", raw("user", "allergy", "peanuts", "The user is allergic to peanuts.")),
    ("I live in Porto, not Lisbon.", raw("user", "lives_in", "Lisbon", "The user lives in Lisbon.")),
    ("I no longer take aspirin.", raw("user", "medication", "aspirin", "The user takes aspirin.")),
    ("My cat is called Mochi, not Miso.", raw("user", "has_cat", "Miso", "The user has a cat called Miso.")),
    ("I drink green tea every morning.", raw("user", "birthday", "green tea", "The user's birthday is green tea.")),
    ("I'm not a nurse.", raw("user", "works_as", "nurse", "The user is a nurse.")),
    ("I play cello on Sundays.", raw("user", "medication", "cello", "The user takes cello.", True)),
    ("I play music every day.", raw("user", "condition", "music", "The user has music.", True)),
    ("I don't drink coffee.", raw("user", "drinks", "coffee", "The user drinks coffee.")),
])
def test_an_object_merely_mentioned_is_no_fact_of_another_relation(user_text, fact):
    result = extract(user_text, fact)
    assert triples(result) == [], "kept: " + fact["statement"]


@pytest.mark.parametrize("user_text, fact", [
    ("I take metformin every morning.", raw("user", "medication", "metformin", "The user takes metformin.", True)),
    ("I'm allergic to peanuts.", raw("user", "allergy", "peanuts", "The user is allergic to peanuts.", True)),
    ("I live in Porto, not Lisbon.", raw("user", "lives_in", "Porto", "The user lives in Porto.")),
    ("I moved to Berlin last month.", raw("user", "lives_in", "Berlin", "The user lives in Berlin.")),
    ("I'm training for a marathon in October.", raw("user", "training_for", "marathon")),
    ("I drink green tea every morning.", raw("user", "drinks", "green tea")),
    ("I play the cello in an orchestra.", raw("user", "plays", "cello")),
    ("My sister Ana is a doctor.", raw("Ana", "works_as", "doctor", "Ana is a doctor.")),
    ("I don't eat meat, I'm vegetarian.", raw("user", "diet", "vegetarian", "The user is vegetarian.", True)),
    ("I don't eat meat, I'm vegetarian.", raw("user", "does_not_eat", "meat", "The user does not eat meat.", True)),
    ("My birthday is on March 3.", raw("user", "birthday", "March 3", "The user's birthday is March 3.")),
    ("Sorry, my cat is called Mochi, not Miso.", raw("user", "has_cat", "Mochi", "The user's cat is Mochi.")),
    ("I'm going to Japan in May!", raw("user", "will_travel_to", "Japan", "The user will travel to Japan.")),
    ("My doctor confirmed it: I can't eat peanuts, I'm allergic.",  # the allergy refers back to the peanuts
     raw("user", "allergy", "peanuts", "The user is allergic to peanuts.", True)),
])
def test_a_relation_said_in_the_users_words_is_kept(user_text, fact):
    result = extract(user_text, fact)
    assert len(result.facts) == 1 and result.facts[0].object == fact["object"], result.dropped


def test_an_object_the_user_did_not_say_word_for_word_is_left_to_the_word_check():
    """A paraphrase has no clause to read: the relation is not judged here (grounding's word check holds it)."""
    assert cue_problem("likes", "medicines", "I take metformin every morning.") == ""
    assert cue_problem("likes", "metformin", "I take metformin every morning.") != ""
