"""core.second_person: a stored fact about "User" shown to the user as "You …", with the verb that agrees, and
nothing half-turned or garbled for text it cannot read without doubt."""
from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from core.second_person import FIRST_PERSON_ANCHOR, to_second_person


@pytest.mark.parametrize("stored, shown", [
    ("User likes green tea", "You like green tea"),
    ("User is allergic to penicillin", "You are allergic to penicillin"),
    ("The user is a nurse.", "You are a nurse."),
    ("user likes tea", "You like tea"),
    ("User has a cat called Miso", "You have a cat called Miso"),
    ("User was born in Porto", "You were born in Porto"),
    ("User doesn't eat meat", "You don't eat meat"),
    ("User doesn\u2019t eat meat", "You don\u2019t eat meat"),
    ("User isn't vegan", "You aren't vegan"),
    ("User wasn't at the party", "You weren't at the party"),
    ("User hasn't been to Japan", "You haven't been to Japan"),
    ("User does yoga", "You do yoga"),
    ("User goes running", "You go running"),
    ("User studies French", "You study French"),
    ("User carries an EpiPen", "You carry an EpiPen"),
    ("User watches films", "You watch films"),
    ("User fixes bikes", "You fix bikes"),
    ("User misses Lisbon", "You miss Lisbon"),
    ("User washes the car", "You wash the car"),
    ("User uses Linux", "You use Linux"),
    ("User plays the cello", "You play the cello"),
    ("User freezes bread", "You freeze bread"),
    ("User skis in winter", "You ski in winter"),
    ("User focuses on work", "You focus on work"),
    ("User no longer eats meat", "You no longer eat meat"),
    ("User often works late", "You often work late"),
    ("User moved to Denver", "You moved to Denver"),
    ("User went home", "You went home"),
    ("User can swim", "You can swim"),
    ("User is learning the cello", "You are learning the cello"),
    ("User's cello teacher is Ana", "Your cello teacher is Ana"),
    ("The user's dog is named Rex.", "Your dog is named Rex."),
    ("User\u2019s cat is called Miso", "Your cat is called Miso"),
    ("Ana is the user's teacher", "Ana is your teacher"),
    ("Ana is User's sister", "Ana is your sister"),
    ("Ana called the user twice", "Ana called you twice"),
    ("Send it to the user.", "Send it to you."),
    ("User lives with his wife", "You live with your wife"),
    ("User helps his sister with her homework", "You help your sister with her homework"),
    ("User considers himself a night owl", "You consider yourself a night owl"),
    ("User likes tea. User is tall.", "You like tea. You are tall."),
    ("USER LIKES TEA", "YOU LIKE TEA"),
    ("The User Likes Tea", "You Like Tea"),
    ("  User likes tea", "  You like tea"),
])
def test_facts_about_the_user_are_said_to_them(stored, shown):
    assert to_second_person(stored) == shown


@pytest.mark.parametrize("stored", [
    "Users like tea",  # people in general, not this user
    "Users' data stays on this Mac",
    "Username is sam",
    "User-friendly apps matter to Ana",
    "A user asked about parking",
    "User",
    "User:",
    "User's",
    "User Smith likes tea",  # not plainly a verb after "User": shown as stored, not "You Smith likes tea"
    "User preferences include dark mode",  # a plural noun, not a verb: not "You preference include …"
    "User settings were reset",
    "User preferences: dark mode",
    "User notes",
    "User, a nurse, works nights",
    "User and Ana are friends",
    "Ana says the user likes tea",  # a subject mid-sentence: its verb is not turned, so neither is it
    "Ana lives in Lisbon",
    "",
    "1234",
    "user\x00likes",
])
def test_what_cannot_be_turned_without_doubt_is_shown_as_stored(stored):
    assert to_second_person(stored) == stored


@pytest.mark.parametrize("stored, shown", [  # in the user's own words: added by hand or with `engram memory add`
    ("I'm allergic to penicillin.", "You're allergic to penicillin."),
    ("I’m allergic to penicillin.", "You’re allergic to penicillin."),
    ("I work as a nurse at the city hospital.", "You work as a nurse at the city hospital."),
    ("My sister Ana plays the violin in Lisbon.", "Your sister Ana plays the violin in Lisbon."),
    ("I am tired and I was late.", "You are tired and you were late."),
    ("I'd like tea. I'll go. I wasn't there.", "You'd like tea. You'll go. You weren't there."),
    ("I've got two cats. Ana gave me my keys; they are mine.",
     "You've got two cats. Ana gave you your keys; they are yours."),
    ("Ana and I are friends.", "Ana and you are friends."),
    ("Yesterday I went home.", "Yesterday you went home."),
    ("Henry I of England fascinates me.", "Henry I of England fascinates you."),
])
def test_a_memory_in_the_first_person_is_said_to_the_user(stored, shown):
    assert to_second_person(stored) == shown
    assert to_second_person(shown) == shown


@pytest.mark.parametrize("stored", ["Me llamo Sam.", "Call me Sam", "World War I.", "iPhone is mine", "Mine!"])
def test_text_with_no_english_i_or_leading_my_is_not_first_person(stored):
    assert to_second_person(stored) == stored


# A verb and its -s form, made by the ordinary spelling rules (what a model writes), to check the way back.
BASES = ["like", "love", "live", "play", "enjoy", "obey", "study", "carry", "try", "marry", "watch", "teach",
         "reach", "fix", "relax", "go", "echo", "miss", "kiss", "address", "wash", "crash", "buzz", "use",
         "choose", "cause", "raise", "freeze", "see", "agree", "own", "need", "want", "hate", "speak", "swim",
         "run", "climb", "bake", "knit", "commute", "prefer", "grow", "drink", "keep", "train", "ski", "die",
         "tie", "lie", "ache", "canoe", "focus"]
ADVERBS = ["", "often ", "also ", "never ", "sometimes ", "no longer ", "usually "]
TAILS = ["", " tea", " in Denver", " the cello every evening", " at six.", " with Ana", " to work!", " a lot"]
SUBJECTS = ["User", "The user", "user", "the user"]


def third_person(base: str) -> str:
    if base == "focus":
        return "focuses"
    if base.endswith("y") and base[-2] not in "aeiou":
        return base[:-1] + "ies"
    if base.endswith(("s", "x", "z", "ch", "sh", "o")):
        return base + "es"
    return base + "s"


@given(st.sampled_from(SUBJECTS), st.sampled_from(ADVERBS), st.sampled_from(BASES), st.sampled_from(TAILS))
def test_every_regular_verb_finds_its_way_back(subject, adverb, base, tail):
    assert to_second_person(f"{subject} {adverb}{third_person(base)}{tail}") == f"You {adverb}{base}{tail}"


WORDS = st.sampled_from(["User", "user", "I", "I'm", "My", "my", "me", "mine", "am", "the", "The", "user's",
                         "User's", "Users", "is", "likes", "has", "was",
                         "doesn't", "his", "himself", "their", "her", "Ana", "tea", "and", ",", ".", "a", "to",
                         "lives", "in", "Denver", "preferences", "include", "studies", "watches", "it", "!"])
SENTENCES = st.lists(WORDS, min_size=1, max_size=12).map(" ".join)
ANY_TEXT = st.text(max_size=60)


@given(st.one_of(SENTENCES, ANY_TEXT))
@example("User\ud800 likes tea")
@example("User \u202e likes tea")
def test_any_text_gives_text_back_and_a_second_pass_changes_nothing(text):
    shown = to_second_person(text)
    assert isinstance(shown, str)
    assert to_second_person(shown) == shown  # idempotent: nothing left half-turned for a second pass to find
    assert len(shown) <= len(text) + 3 * len(text.split())  # a word grows by 3 letters at most ("I'm" → "You're")


@given(st.one_of(SENTENCES, ANY_TEXT).filter(lambda t: "user" not in t.lower() and not FIRST_PERSON_ANCHOR.search(t)))
def test_text_that_is_not_about_the_user_is_untouched(text):
    assert to_second_person(text) == text


# (first-person text left out: "What bothers me is…" → "…you is…" is right)
@given(SENTENCES.filter(lambda t: not FIRST_PERSON_ANCHOR.search(t)))
def test_you_is_never_left_with_a_verb_that_agrees_with_he(text):
    shown = to_second_person(text)
    assert not re.search(r"\bYou (is|was|has|does|doesn't|likes|lives|studies|watches)\b", shown), (text, shown)
    assert not re.search(r"\byou (is|was|has|does)\b", shown), (text, shown)


@pytest.mark.parametrize("stored, shown", [
    ("I " * 100_000, "You " + "you " * 99_999),
    ("I me " * 40_000, "You you " + "you you " * 39_999),
    ("Henry I of " * 20_000, "Henry I of " * 20_000),
])
def test_a_long_first_person_text_is_turned_whole(stored, shown):
    # Each "I" once copied and searched all the text before it: 200,000 characters of "I " took over a minute.
    assert to_second_person(stored) == shown
