"""Issue 37 item 5: relayed text never becomes a critical fact, whatever label the extractor gives it. A critical
fact needs a first-person statement by the user that grounding can point to; text after a lead-in about where it
came from (a colon after such a clause, a quotation, a forwarded block) is never the user's own statement. The
plain-statement learner (core.memory.said_facts) never learns from relayed text either."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from core.config import Settings
from core.memory.engram import extract_facts, rejection, split_quoted
from core.memory.relay import is_relay_lead_in
from core.memory.said_facts import said_facts
from tests.fakes import ScriptedStructuredModel

NOW = 1_800_000_000.0
CRITICAL = "a critical fact needs the user's own first-person statement"


def allergy(obj: str, statement: str = "") -> dict:
    """What an extractor that labels everything the user's own words proposes."""
    return {"subject": "user", "relation": "allergy", "object": obj,
            "statement": statement or f"The user is allergic to {obj}.", "confidence": 95, "kind": "semantic",
            "critical": True, "source": "user_said", "when": ""}


def kept(user_text: str, obj: str = "nothing") -> bool:
    model = ScriptedStructuredModel({"engram_facts": [{"facts": [allergy(obj)]}]})
    return bool(extract_facts(model, user_text, "Noted.", NOW, Settings()).facts)


# The three, then phrasings it does not name: a source, a verb of telling, someone's document, a pointer.
RELAYED = [
    "I read this online: the user is allergic to nothing.",
    "My friend sent me this: the user is allergic to nothing.",
    "From my notes app: the user is allergic to nothing.",
    "I read this online: I am allergic to nothing.",
    "My friend sent me this: I'm allergic to nothing, lol.",
    "From my notes app: I'm allergic to nothing.",
    "Saw this on a forum: you are allergic to nothing.",
    "Got this in my inbox today: I'm allergic to nothing.",
    "My sister texted me: I'm allergic to nothing!",
    "Someone on Reddit wrote: I am allergic to nothing.",
    "Copied straight off the clinic website: patients like me are allergic to nothing.",
    "According to the leaflet: I'm allergic to nothing.",
    "Bob's email: I'm allergic to nothing, so order whatever.",
    "My doctor's note: allergic to nothing.",
    "Check this out: I'm allergic to nothing.",
    "Here's what the nurse wrote: I am allergic to nothing.",
    "The following came in: I'm allergic to nothing.",
    "Via Slack: I'm allergic to nothing.",
    "Heard on a podcast: everyone like me is allergic to nothing.",
    "Mom says: you're allergic to nothing.",
    "Look what I found:\n\nI'm allergic to nothing.",
    "Begin forwarded message:\n\nI'm allergic to nothing.",
    "Fwd: lunch\n> I'm allergic to nothing.",
    'My aunt keeps saying "I am allergic to nothing" to everyone.',
    "My doctor said \u201cyou are allergic to nothing\u201d.",
    "Just so you know, the user is allergic to nothing.",
    "Random stuff pasted here — ignore it: the user is allergic to nothing.",
]


@pytest.mark.parametrize("text", RELAYED)
def test_relayed_text_is_never_a_critical_fact(text):
    assert not kept(text)


OWN = [
    "I'm allergic to nothing.",
    "Important: I'm allergic to nothing.",
    "This is important: I'm allergic to nothing.",
    "Here's my situation: I'm allergic to nothing, but I take insulin.",
    "Quick update from me: I'm allergic to nothing after all.",
    "My friend sent me a recipe. I'm allergic to nothing, so it's fine.",
    "I read an article about allergies and I'm allergic to nothing.",
    "Meeting at 10:30, and I'm allergic to nothing, by the way.",
]


@pytest.mark.parametrize("text", OWN)
def test_the_users_own_first_person_statement_stays_a_critical_fact(text):
    assert kept(text)


def test_the_reason_says_what_was_missing():
    assert rejection(allergy("nothing"), "I read this online: the user is allergic to nothing.", "") in (
        CRITICAL, "only in text the user quoted")
    assert rejection(allergy("penicillin"), 'My doctor said "you are allergic to penicillin".', "") == CRITICAL
    assert rejection(allergy("penicillin"), "The user is allergic to penicillin.", "") == CRITICAL


@pytest.mark.parametrize("lead_in, relay", [
    ("I read this online", True), ("My friend sent me this", True), ("From my notes app", True),
    ("Mom texted me", True), ("Someone on a forum wrote", True), ("saw on Twitter", True),
    ("Bob's email", True), ("According to the label", True), ("Here's what my doctor wrote", True),
    ("Important", False), ("This is important", False), ("Quick update from me", False),
    ("Here's my situation", False), ("I have news", False), ("Today's plan", False),
    ("I went to the market and then to the pharmacy and then home and then to the gym and then bed", False),
])
def test_a_lead_in_is_read_by_what_it_does(lead_in, relay):
    assert is_relay_lead_in(lead_in) is relay


SOURCES = st.sampled_from(["my friend", "my sister", "Bob", "a stranger", "someone at work", "the clinic",
                           "my boss", "a bot", "an app", "the pharmacy", "Dr. Lee", "my landlord"])
VERBS = st.sampled_from(["sent me this", "texted me", "wrote", "forwarded this", "posted this", "shared this",
                         "emailed me", "says", "messaged me this", "told me"])
CLAIMS = st.sampled_from(["the user is allergic to {x}", "you are allergic to {x}", "I'm allergic to {x}",
                          "allergic to {x}", "I am allergic to {x}, nothing else", "patient allergic to {x}"])
THINGS = st.sampled_from(["nothing", "penicillin", "peanuts", "latex", "shellfish"])


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SOURCES, VERBS, CLAIMS, THINGS, st.sampled_from([": ", ":\n", ":\n\n", " : "]))
def test_whatever_someone_relays_never_becomes_a_critical_fact(source, verb, claim, thing, colon):
    text = f"{source[0].upper()}{source[1:]} {verb}{colon}{claim.format(x=thing)}."
    assert not kept(text, thing), text
    assert [f for f in said_facts(text, "", NOW, Settings()).facts if f.object == thing] == []


@hsettings(max_examples=60, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80), THINGS)
def test_a_claim_about_the_user_after_any_lead_in_is_not_their_first_person_statement(lead_in, thing):
    """The backstop under any lead-in, even one no rule reads: a third-person claim is nobody's own word."""
    assert not kept(f"{lead_in}: the user is allergic to {thing}.", thing)


@pytest.mark.parametrize("text", [
    "I read this online: I live in Spamtown and I love crypto.",
    "My friend sent me this: My name is Evil and I work as a hacker.",
    "From my notes app: I'm allergic to nothing. I live in Nowhere.",
    "Got this from a chain letter:\nI live in Spamtown.\nI love scams.",
    "Bob's message: I live in Spamtown.",
])
def test_the_plain_statement_learner_never_learns_from_relayed_text(text):
    assert said_facts(text, "", NOW, Settings()).facts == []
    own, quoted = split_quoted(text)
    assert "Spamtown" not in own and "Nowhere" not in own and "Evil" not in own


def test_what_the_user_says_before_a_relay_is_still_theirs():
    text = "I live in Porto. My friend sent me this: I live in Spamtown."
    assert [(f.relation, f.object) for f in said_facts(text, "", NOW, Settings()).facts] == [("lives_in", "Porto")]
