"""Facts a person states about themself in plain English, found without a model: "My name is Lina", "I live in
Lisbon", "I work as a nurse", "My sister Ana…", "I'm allergic to penicillin", "I love hiking".

A weak model (SmolLM2-135M, the one model a fresh install here can run offline, near what an 8 GB Mac runs) proposes
few facts, or wrong ones that grounding then drops: a first hour where Engram was told a name, a city and a job, and
remembers none of them. These patterns read only the person's own first-person sentences (core.memory.engram's
split_quoted leaves out pasted, relayed and injected text), skip questions, negations, hypotheticals and reported
speech, and keep each fact in the person's own words, so every one passes the same grounding check as a model's
(engram.rejection) before it is reconciled like one. English only: other languages are left to the model.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from typing import Any

from core.config import Settings
from core.memory.engram import SAID, Extraction, Fact, rejection, split_quoted, to_fact

CONFIDENCE = 80  # percent, as the model answers: stated outright, but read by a pattern, not understood
# At most this many a turn, whatever the model's own limit (engram_max_facts bounds what the model writes, and a
# person who lowered it for a slow model still said what they said): a paste of a hundred "I like X" lines is not
# a hundred facts.
MAX_PER_TURN = 8
_NAME = r"(?-i:[A-Z][a-zà-ÿ'’-]+(?: [A-Z][a-zà-ÿ'’-]+)?)"
_PLACE = r"(?-i:[A-Z][\w'’.-]*(?:[ -](?:(?:of|de|da|do|del|la|le|am|upon|on) )?[A-Z][\w'’.-]*){0,3})"
# A short noun phrase: up to five words, ending before punctuation or a word that starts another clause.
_PHRASE = (r"(?:(?:the|a|an|my) )?[\w'’-]+(?: [\w'’-]+){0,4}?"
           r"(?=\s*(?:[,.;:!?)]|$)|\s+(?:and|but|or|so|because|since|as|when|while|where|which|who|whom|with|for|"
           r"in|on|at|to|from|every|each|last|next|this|these|that|too|also|very|really|a lot)\b)")
_KIN = (r"(?:sister|brother|mother|mom|mum|father|dad|wife|husband|partner|girlfriend|boyfriend|fianc[eé]e?|son|"
        r"daughter|grandmother|grandma|granny|grandfather|grandpa|aunt|uncle|cousin|niece|nephew|best friend|boss|"
        r"roommate|flatmate|dog|cat|puppy|kitten)")
_JOBS = ("nurse|teacher|engineer|developer|programmer|doctor|physician|surgeon|dentist|lawyer|attorney|accountant|"
         "architect|designer|artist|writer|journalist|editor|student|chef|cook|baker|waiter|waitress|pharmacist|"
         "scientist|researcher|professor|lecturer|librarian|electrician|plumber|carpenter|mechanic|pilot|driver|"
         "firefighter|paramedic|therapist|psychologist|consultant|manager|analyst|farmer|musician|photographer|"
         "translator|veterinarian|vet|midwife|caregiver|cashier|entrepreneur|freelancer|retiree|soldier|officer")


@dataclass(frozen=True)
class _Pattern:
    relation: str
    regex: re.Pattern
    statement: str  # str.format with the match's groups: the person's own words, in the third person


def _pattern(relation: str, regex: str, statement: str) -> _Pattern:
    return _Pattern(relation, re.compile(regex, re.IGNORECASE), statement)


_I_AM = r"\bi(?:'m|’m| am)"
_NOW = r"(?:now |currently |still |also |just )?"
# A job named outright, up to two words before it ("software engineer"); "a teacher's assistant" is not a teacher.
_JOB = rf"(?:[a-z-]+ ){{0,2}}(?:{_JOBS})\b(?!['’])"
PATTERNS = (
    _pattern("name", rf"\bmy name is (?P<obj>{_NAME})", "The user's name is {obj}."),
    _pattern("name", rf"\b(?:hi|hello|hey)(?: there)?[,!.]?\s+i(?:'m|’m| am) (?P<obj>{_NAME})"
                     r"(?=\s*(?:[,.!;]|$|and\b))", "The user is {obj}."),
    _pattern("name", rf"{_I_AM} called (?P<obj>{_NAME})", "The user is called {obj}."),
    _pattern("lives_in", rf"\bi {_NOW}(?:live|(?:'m|’m|am) living) in (?P<obj>{_PLACE})", "The user lives in {obj}."),
    _pattern("lives_in", rf"\bi (?:just |recently )?(?:moved|relocated) to (?P<obj>{_PLACE})",
             "The user moved to {obj}."),
    _pattern("from", rf"(?:{_I_AM}|\bi come) from (?P<obj>{_PLACE})", "The user is from {obj}."),
    _pattern("grew_up_in", rf"\bi grew up in (?P<obj>{_PLACE})", "The user grew up in {obj}."),
    _pattern("works_as", rf"\bi {_NOW}work as (?P<art>an?) (?P<obj>{_PHRASE})", "The user works as {art} {obj}."),
    _pattern("works_as", rf"{_I_AM} (?P<art>an?) (?P<obj>{_JOB})", "The user is {art} {obj}."),
    _pattern("works_at", rf"\bi {_NOW}work (?P<prep>at|for) (?P<obj>{_PHRASE})", "The user works {prep} {obj}."),
    _pattern("studies", rf"\bi(?: study|(?:'m|’m| am) studying) (?P<obj>{_PHRASE})", "The user studies {obj}."),
    _pattern("family", rf"\bmy (?P<rel>{_KIN})(?:'s name is|,? (?:who is |is |'s )?(?:called|named)|,)? "
                       rf"(?P<obj>{_NAME})\b", "The user's {rel} is {obj}."),
    _pattern("lives_in", rf"\bmy {_KIN},? (?P<subj>{_NAME}),? {_NOW}lives in (?P<obj>{_PLACE})",
             "{subj} lives in {obj}."),
    _pattern("works_as", rf"\bmy {_KIN},? (?P<subj>{_NAME}),? (?:is|works as) (?P<art>an?) (?P<obj>{_JOB})",
             "{subj} is {art} {obj}."),
    _pattern("family", rf"\bi have an? (?P<rel>{_KIN}) (?:called|named) (?P<obj>{_NAME})\b",
             "The user has a {rel} called {obj}."),
    _pattern("allergy", rf"{_I_AM} (?:severely |very |highly |deathly )?allergic to (?P<obj>{_PHRASE})",
             "The user is allergic to {obj}."),
    _pattern("diet", rf"{_I_AM} (?:an? )?(?P<obj>vegetarian|vegan|pescatarian|celiac|coeliac|lactose intolerant)\b",
             "The user is {obj}."),
    _pattern("does_not_eat", rf"\bi (?:don't|don’t|do not|never) eat (?P<obj>{_PHRASE})",
             "The user does not eat {obj}."),
    _pattern("plays", rf"\bi play (?P<art>the )?(?P<obj>{_PHRASE})", "The user plays {art}{obj}."),
    _pattern("drinks", rf"\bi {_NOW}drink (?P<obj>{_PHRASE})", "The user drinks {obj}."),
    _pattern("prefers", rf"\bi (?:really )?prefer (?P<obj>{_PHRASE})", "The user prefers {obj}."),
    _pattern("training_for", rf"{_I_AM} training for (?P<obj>{_PHRASE})", "The user is training for {obj}."),
    _pattern("birthday", r"\bmy birthday is (?P<on>on )?(?P<obj>(?-i:[A-Z][a-z]+) \d{1,2}(?:st|nd|rd|th)?\b|"
                         r"\d{1,2}(?:st|nd|rd|th)? (?:of )?(?-i:[A-Z][a-z]+))", "The user's birthday is {on}{obj}."),
    _pattern("favourite", rf"\bmy (?P<fav>favou?rite) (?P<what>[a-z]+) is (?P<obj>{_PHRASE})",
             "The user's {fav} {what} is {obj}."),
    _pattern("speaks", r"\bi speak (?P<obj>(?-i:[A-Z][a-z]+)(?: and (?-i:[A-Z][a-z]+))?)", "The user speaks {obj}."),
    _pattern("likes", rf"\bi (?:really |absolutely |truly )?(?P<verb>love|like|enjoy|adore) (?P<obj>{_PHRASE})",
             "The user {verb}s {obj}."),
    _pattern("dislikes", rf"\bi (?:really )?(?P<verb>hate|dislike|detest) (?P<obj>{_PHRASE})",
             "The user {verb}s {obj}."),
)
# What makes a sentence not a plain statement about the speaker now: a question, a wish or a condition, or someone
# else's words.
_NOT_PLAIN = re.compile(r"\?|\b(?:if|would|wish|maybe|perhaps|might|could|should|suppose|imagine|pretend|"
                        r"hypothetically|said|says|told|tells|asked|wrote|writes)\b|[\"“”‘]", re.IGNORECASE)
# A past the person left: only what the sentence says after its clause holds now ("I don't live in Lisbon anymore,
# I live in Porto"); before it, or with the past after it ("I live in Lisbon, but not anymore"), nothing is read.
_PAST = re.compile(r"\b(?:used to|no longer|anymore|any more)\b", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[,;]|\bbut\b", re.IGNORECASE)  # a negation beyond one does not touch the match
_NEGATED = re.compile(r"\b(?:not|never|no)\b|n't\b|n’t\b", re.IGNORECASE)
# An object that points at something else instead of naming it ("I love it", "I like that idea").
_VAGUE = frozenset("it that this these those them you your yours him his her their our us me myself something "
                   "anything everything nothing one some lot lots to too so much more less".split())
# A liking of "the idea" or "this plan" is about the conversation, not the person; "a role" is not an instrument.
_CONTEXTUAL = {"likes": ("the",), "dislikes": ("the",), "plays": ("a", "an")}
_ARTICLES = frozenset(("the", "a", "an", "my"))
# Right after a fact, what the person says it is not: "my cat is called Mochi, not Miso", "I live in Porto, not Lisbon".
# "not just blues", "not far from the sea" add to it or describe it: they correct nothing.
_NOT_A_CORRECTION = ("just|only|even|really|too|so|very|quite|always|yet|sure|much|exactly|far|long|bad|that|"
                     "as much|as well|anymore")
_NOT_THAT = re.compile(rf"\s*,?\s*(?:and |but )?not (?!(?:{_NOT_A_CORRECTION})\b)(?:in |at |as |called )?"
                       r"(?:(?:the|a|an) )?(?P<was>[\w'’-]+(?: [\w'’-]+){0,3}?)\s*(?=[,.;!]|$)", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


def said_facts(user_text: str, assistant_text: str, now: float, settings: Settings) -> Extraction:
    """The facts the person stated about themself in their own plain first-person English sentences."""
    found, seen = Extraction(), set()
    own_words, _ = split_quoted(user_text)
    for sentence in _SENTENCE.finditer(own_words):
        for item in _sentence_facts(sentence.group(0)):
            key = (item["subject"], item["relation"], item["object"].casefold())
            if key in seen:
                continue  # judged once: a paste repeating a sentence 20,000 times is not read 20,000 times
            seen.add(key)
            why = rejection(item, user_text, assistant_text, settings)
            if why:
                found.dropped.append((item, why))
                continue
            found.facts.append(replace(to_fact(item, now), found_by=SAID, replaces=item["replaces"]))
            if len(found.facts) >= MAX_PER_TURN:
                return found
    return found


def _sentence_facts(sentence: str) -> list[dict[str, Any]]:
    if _NOT_PLAIN.search(sentence):
        return []
    items = []
    clauses = [m.end() for m in _CLAUSE_BREAK.finditer(sentence)]  # once a sentence: a paste is one long one
    now_from = _after_the_past(sentence, clauses)
    for pattern in PATTERNS:
        for match in pattern.regex.finditer(sentence, now_from):
            before = bisect.bisect_right(clauses, match.start())
            clause = sentence[clauses[before - 1] if before else 0:match.end()]
            if _NEGATED.search(clause) and pattern.relation != "does_not_eat":
                continue
            item = _item(pattern, match)
            if item is not None:
                was = _NOT_THAT.match(sentence, match.end())
                items.append({**item, "replaces": was.group("was") if was else ""})
    return items


def _after_the_past(sentence: str, clauses: list[int]) -> int:
    """Where what holds now starts: the clause after the last one naming a past the person left (0: none does; the
    sentence's end: the past is its last clause)."""
    last = None
    for last in _PAST.finditer(sentence):  # noqa: B007 - the loop only walks to the last match
        pass
    if last is None:
        return 0
    after = bisect.bisect_right(clauses, last.end())
    return clauses[after] if after < len(clauses) else len(sentence)


def _item(pattern: _Pattern, match: re.Match) -> dict[str, Any] | None:
    said = {k: (v or "").strip() for k, v in match.groupdict().items()}
    said["obj"] = said["obj"].rstrip(".,;:!'’ ")
    if _vague(pattern.relation, said["obj"]):
        return None
    said["obj"] = re.sub(r"^my ", "their ", said["obj"], flags=re.IGNORECASE)  # "I love my job": said of the user
    for key in ("rel", "verb", "fav", "what", "art"):
        said[key] = said.get(key, "").casefold()
    if pattern.relation == "plays" and said["art"]:
        said["art"] += " "  # "plays the cello", "plays tennis"
    said["on"] = "on " if said.get("on") else ""
    relation = said["rel"].replace(" ", "_") or (f"favourite_{said['what']}" if said["what"] else pattern.relation)
    return {"subject": said.get("subj") or "user", "relation": relation, "object": said["obj"],
            "statement": pattern.statement.format(**said), "confidence": CONFIDENCE, "kind": "semantic",
            "critical": False, "source": "user_said", "when": ""}


def _vague(relation: str, obj: str) -> bool:
    """An object that points at something else instead of naming it, or only an article."""
    words = obj.casefold().split()
    return (not words or words[0] in _VAGUE or set(words) <= _ARTICLES or obj in ("I", "I'm")
            or words[0] in _CONTEXTUAL.get(relation, ()))


def with_plain_facts(extraction: Extraction, plain: Extraction) -> Extraction:
    """The model's facts, then the plainly said ones about something the model said nothing of: a plain fact whose
    subject is one of the model's and whose object's words hold, or are held by, that fact's object is the same
    fact told another way ("has_cat Miso" and "cat Miso"; "short answers" and "short answers without emojis").
    What either left out stays listed as dropped."""
    added = [f for f in plain.facts if not any(_same_thing(f, told) for told in extraction.facts)]
    return Extraction(extraction.facts + added, extraction.dropped + plain.dropped, extraction.dates_ignored)


def _same_thing(fact: Fact, told: Fact) -> bool:
    return fact.subject.casefold() == told.subject.casefold() and names_the_same(fact.object, told.object)


def names_the_same(one: str, other: str) -> bool:
    """Whether two objects name the same thing: the words of one hold the other's ("Boston" and "Boston, MA")."""
    mine, theirs = _object_words(one), _object_words(other)
    return bool(mine and theirs) and (mine <= theirs or theirs <= mine)


def _object_words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold())) - _ARTICLES - {"their"}
