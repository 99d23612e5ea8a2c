"""Issue 40 §3: grounding holds a fact's shape, not only its words. Qwen2.5-0.5B, through bench/learning.py, had
its backwards facts kept — (Lisbon, works_as, user), (Santa Maria hospital, works_as, nurse) — because every word
was the user's; it also copied the prompt's own phrase "durable facts about the user" into facts. Each case is
written here as the scripted model's exact output, through the real extraction (core.memory.engram)."""
from __future__ import annotations

import pytest

from core.config import GenerationSettings, Settings
from core.memory.engram import extract_facts
from core.memory.fact_shape import roles
from tests.fakes import ScriptedStructuredModel

NOW = 1_800_000_000.0
SETTINGS = Settings(generation=GenerationSettings(engram_max_facts=8))


def raw(subject: str, relation: str, obj: str, statement: str = "", confidence: int = 90) -> dict:
    return {"subject": subject, "relation": relation, "object": obj,
            "statement": statement or f"{subject} {relation.replace('_', ' ')} {obj}.", "confidence": confidence,
            "kind": "semantic", "critical": False, "source": "user_said", "when": ""}


def extract(user_text: str, *facts: dict):
    model = ScriptedStructuredModel({"engram_facts": [{"facts": list(facts)}]})
    return extract_facts(model, user_text, "Thanks for telling me.", NOW, SETTINGS)


def triples(result) -> list[tuple[str, str, str]]:
    return [(f.subject, f.relation, f.object) for f in result.facts]


def test_a_place_the_user_lives_in_is_not_someone_who_works_as_the_user():
    result = extract("I live in Lisbon.", raw("Lisbon", "works_as", "user", "Lisbon works as the user."))
    assert triples(result) == []
    assert result.dropped[0][1] == "the user cannot be the object of works_as"


def test_the_hospital_the_user_works_at_is_not_a_nurse():
    result = extract("I work as a nurse at Santa Maria hospital.",
                     raw("Santa Maria hospital", "works_as", "nurse", "Santa Maria hospital works as a nurse."))
    assert triples(result) == []
    assert result.dropped[0][1] == "the subject is the object of the user's sentence"


def test_the_same_words_the_right_way_round_are_kept():
    result = extract("I work as a nurse at Santa Maria hospital.",
                     raw("user", "works_as", "nurse", "The user works as a nurse."),
                     raw("user", "works_at", "Santa Maria hospital", "The user works at Santa Maria hospital."))
    assert triples(result) == [("user", "works_as", "nurse"), ("user", "works_at", "Santa Maria hospital")]
    lives = extract("I live in Lisbon.", raw("user", "lives_in", "Lisbon", "The user lives in Lisbon."))
    assert triples(lives) == [("user", "lives_in", "Lisbon")]


@pytest.mark.parametrize("user_text, fact, why", [
    ("I work as a nurse at Santa Maria hospital.", raw("user", "works_as", "Santa Maria hospital"),
     "a job is not a place"),
    ("I live in Lisbon and work as a nurse.", raw("user", "lives_in", "nurse", "The user lives in nurse."),
     "a place is not a role"),
    ("Hi, I'm Maya and I grew up in Porto.", raw("user", "name", "Porto", "The user's name is Porto."),
     "a name is not a place"),
    ("I love Lisbon.", raw("Lisbon", "likes", "user", "Lisbon likes the user."), "the user cannot be the object"),
    ("I love Lisbon.", raw("Lisbon", "is", "beautiful city", "Lisbon is a city."), "the subject is the object"),
    ("I met Ana at the gym.", raw("Ana", "likes", "gym", "Ana likes the gym."), "the subject is the object"),
    ("I moved to Porto with my sister.", raw("Porto", "lives_in", "sister"), "the subject is the object"),
    ("My cat Tom sleeps all day.", raw("Tom", "name", "Tom", "Tom is named Tom."), "the subject and the object"),
    ("My brother Tomás lives in Porto.", raw("user", "lives_in", "Porto", "The user lives in Porto."),
     "said of someone else"),
    ("My sister Ana is a doctor.", raw("user", "works_as", "doctor", "The user is a doctor."), "said of someone else"),
    ("My daughter was born on 12 March 2019.", raw("user", "born_on", "12 March 2019"), "said of someone else"),
    ("I'm a nurse, but my older brother works as a pilot.", raw("user", "works_as", "pilot", "The user is a pilot."),
     "said of someone else"),
])
def test_a_fact_whose_shape_does_not_fit_its_relation_is_refused(user_text, fact, why):
    result = extract(user_text, fact)
    assert triples(result) == [] and result.dropped[0][1].startswith(why)


@pytest.mark.parametrize("user_text, fact", [
    ("My daughter Lina loves jellyfish.", raw("Lina", "loves", "jellyfish", "Lina loves jellyfish.")),
    ("My sister Ana lives in Porto.", raw("Ana", "lives_in", "Porto", "Ana lives in Porto.")),
    ("Hi, I'm Maya.", raw("user", "name", "Maya", "The user's name is Maya.")),
    ("I'm a software engineer.", raw("user", "works_as", "software engineer", "The user is a software engineer.")),
    ("I work for the United Nations in Geneva.",
     raw("user", "works_for", "the United Nations", "The user works for the United Nations.")),
    ("I'm from New York.", raw("user", "from", "New York", "The user is from New York.")),
    ("I love Lisbon.", raw("user", "likes", "Lisbon", "The user likes Lisbon.")),
    ("Porto is where I grew up.", raw("user", "grew_up_in", "Porto", "The user grew up in Porto.")),
    ("My brother Tomás lives in Porto.", raw("user", "brother", "Tomás", "The user's brother is Tomás.")),
    ("My brother Tomás lives in Porto.", raw("Tomás", "lives_in", "Porto", "Tomás lives in Porto.")),
    ("My sister is called Ana.", raw("user", "sister", "Ana", "The user's sister is Ana.")),
    ("My sister and I live in Porto.", raw("user", "lives_in", "Porto", "The user lives in Porto.")),
    ("My favourite book is Dune.", raw("user", "likes", "Dune", "The user likes Dune.")),
])
def test_a_fact_the_right_way_round_is_kept(user_text, fact):
    result = extract(user_text, fact)
    assert triples(result) == [(fact["subject"], fact["relation"].replace(" ", "_"), fact["object"])], result.dropped


def test_the_prompts_own_words_are_not_a_fact():
    """Qwen2.5-0.5B copied "durable facts about the user" (the prompt's first line) into a fact."""
    result = extract("I love jellyfish, they are my favourite animal.",
                     raw("user", "likes", "durable facts about the user",
                         "The user likes durable facts about the user."),
                     raw("user", "likes", "jellyfish", "The user likes jellyfish."))
    assert triples(result) == [("user", "likes", "jellyfish")]
    assert result.dropped[0][1] == "copies the prompt's own words: 'durable facts about'"
    said = extract("I collect durable facts about the user interface for work.",
                   raw("user", "collects", "durable facts about the user interface",
                       "The user collects durable facts about the user interface."))
    assert [f.object for f in said.facts] == ["durable facts about the user interface"]  # the user's own words


def test_what_a_phrase_is_in_the_sentence():
    assert roles("Lisbon", "I live in Lisbon.") == {"place"}
    assert roles("nurse", "I work as a nurse.") == {"role"}
    assert roles("Maya", "Hi, I'm Maya.") == roles("Maya", "I am Maya") == {"role"}
    assert roles("Lisbon", "I love Lisbon. Lisbon is lovely.") == {"object", "subject"}
    assert roles("Ana", "My sister Ana lives in Porto.") == {"subject"}
    assert roles("Tokyo", "I live in Lisbon.") == set()


def test_a_tie_to_the_user_said_the_other_way_round_is_stored_from_the_users_side():
    result = extract("My brother Tomás lives in Porto.",
                     raw("Tomás", "brother_of", "user", "Tomás is the user's brother."))
    assert triples(result) == [("user", "brother", "Tomás")]
    knows = extract("Ana is my sister.", raw("Ana", "is_sister_of", "me", "Ana is the user's sister."))
    assert triples(knows) == [("user", "sister", "Ana")]
    married = extract("I married Ana.", raw("Ana", "married_to", "user", "Ana is married to the user."))
    assert triples(married) == [("user", "married", "Ana")]


def test_what_qwen_invented_for_a_greeting_is_not_kept():
    """Qwen2.5-0.5B's exact answer to "Hi, I'm Maya." (bench/results/learning-qwen2.5-0.5b.json): three facts
    about Maya the user never said, beside nothing of the name itself."""
    result = extract("Hi, I'm Maya.", raw("Maya", "works_as", "doctor", "Maya works as a doctor."),
                     raw("Maya", "likes", "pizza", "Maya likes pizza."),
                     raw("Maya", "allergy", "cough", "Maya is allergic to cough."))
    assert triples(result) == [] and len(result.dropped) == 3
