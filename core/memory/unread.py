"""Whether a turn leaves the model anything to learn: the words of the person's own statements about themself that
the plain-statement patterns (core.memory.said_facts) did not already read.

Asking the model costs minutes a turn on the CPUs Engram runs on (Qwen2.5-0.5B: ~four minutes of a statement on this
machine's CPU before 2026-11-28), and on "Good morning!", "Can you tell me a joke?" or "I live in Lisbon." (read
whole by a pattern) it can only invent: for "Hi, I'm Maya." a real model proposed that Maya is a doctor who likes
pizza. So the model is asked only when some sentence of the person's own words (not what they pasted, relayed or
quoted: engram.split_quoted) speaks in the first person and holds a content word no kept plain fact says — "I work
as a nurse at Santa Maria hospital" leaves "Santa Maria hospital" to the model. Greetings and thanks are not
content. A question counts only through I / my / we, not through "me": "Can you tell me a joke?" asks, it does not
tell.
"""
from __future__ import annotations

import re

from core.memory.engram import Extraction, split_quoted
from core.memory.grounding import content_words

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_WORD = re.compile(r"[\w'’]+")
_SPEAKS_OF_SELF = frozenset("i i'm im i've i'd i'll my mine myself we we're we've our ours ourselves".split())
_OBJECT_SELF = frozenset(("me",))  # "Spicy food makes me sick" tells; "Can you tell me…?" asks
_CHIT_CHAT = frozenset("hi hello hey hiya thanks thank bye goodbye ok okay lol haha yes yeah yep no nope please "
                       "sorry oh wow well cheers great cool nice".split())
# What \w+ leaves of a negation ("don't" gives "don"): the negation is read with the fact ("does not eat meat").
_NEGATION_STEMS = frozenset("don doesn didn isn aren wasn weren won haven hasn hadn couldn wouldn shouldn ain".split())
_NOT_CONTENT = content_words(" ".join(_CHIT_CHAT | _NEGATION_STEMS))
_COMMON_ENGLISH = _CHIT_CHAT | _SPEAKS_OF_SELF | frozenset(
    "me the an and or but of to in on at by for with from as about like is are was were be been am do does did have "
    "has had will would can could should may might what how why when where who which this that it its you your "
    "they them their he him his she her there here not so too very just again good morning afternoon evening night "
    "day today tomorrow tell going".split())


def unread_words(user_text: str, plain: Extraction) -> set[str]:
    """Content words (grounding's stems) of the person's own first-person sentences that no kept plain fact says."""
    own_words, _ = split_quoted(user_text)
    read = set()
    for fact in plain.facts:
        read |= content_words(" ".join((fact.statement, fact.object, fact.replaces)))
    unread: set[str] = set()
    for sentence in _SENTENCE.finditer(own_words):
        text = sentence.group(0)
        if speaks_of_self(text):
            unread |= content_words(text) - read - _NOT_CONTENT
    return unread


def speaks_of_self(sentence: str) -> bool:
    """I / my / we… in it, or "me" outside a question; a sentence not in English always might (the first-person
    words and the plain patterns are English only: another language is left to the model, as before)."""
    words = {w.lower().replace("’", "'") for w in _WORD.findall(sentence)}
    if not reads_as_english(sentence):
        return True
    return bool(words & _SPEAKS_OF_SELF) or (bool(words & _OBJECT_SELF) and "?" not in sentence)


def reads_as_english(sentence: str) -> bool:
    """At least half of its words (of two letters or more) are common English ones: "Good morning!", "Can you tell
    me a joke?" are; "Ich wohne in Berlin", "J'habite à Lyon" are not."""
    words = [w for w in re.findall(r"\w+", sentence.lower()) if len(w) > 1]
    return bool(words) and sum(w in _COMMON_ENGLISH for w in words) * 2 >= len(words)


def model_has_work(user_text: str, plain: Extraction) -> bool:
    """Whether extraction should ask the model about this turn (see the module's docstring)."""
    return bool(unread_words(user_text, plain))
