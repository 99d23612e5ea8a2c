"""A fact's shape: who can be its subject and what its object can be, read from where the user's sentence puts them.

Grounding by words alone kept a real model's backwards facts: "I live in Lisbon." gave (Lisbon, works_as, user) and
"I work as a nurse at Santa Maria hospital." gave (Santa Maria hospital, works_as, nurse) — every word is the
user's, the order is not. What a phrase is in the sentence shows in the word before it, a closed class of words:
after a preposition it is where, when, or with whom ("in Lisbon", "at Santa Maria hospital"), after "as" it is a
role ("as a nurse"), after the user's own verb it is what the user does or is ("I love Lisbon", "I'm Maya"). So:

- a subject other than the user must stand somewhere as the subject of what the user said ("My sister Ana lives
  in Porto"), not only as the object of the user's sentence;
- the user is the object only of a relation between people (Ana, sister_of, user), never of a job, a place or a
  liking;
- each kind of relation takes its kind of object: a job is not where ("works_as" what follows "at" or "in"), a place
  is not a role ("lives_in" what follows "as"), a name is not a place.

A phrase the user did not say word for word (a paraphrase) has no place to read, and its shape is not judged here:
grounding's word check still holds it.
"""
from __future__ import annotations

import re

from core.memory.critical import canonical_relation

_DETERMINERS = frozenset("a an the my our his her their your this that these those some its".split())
PLACE_PREPOSITIONS = frozenset("in at to from near into inside outside around across within towards toward "
                               "on onto".split())
OTHER_PREPOSITIONS = frozenset("with for of about by like than over under after before during without "
                               "since until per via among between behind beside".split())
_FIRST_PERSON_SUBJECTS = frozenset("i we i'm im i've we're we've i'd".split())
_BE = frozenset("am 'm are was were is be being been".split())
_WORD = re.compile(r"[\w'’]+")
_CLAUSE = re.compile(r"[,;.!?\n]|\b(?:and|but)\b", re.IGNORECASE)
_USER = frozenset(("user", "the user", "i", "me", "myself", "the user himself", "the user herself"))
# Kinds of relation, by the words of their canonical name.
_JOB = frozenset("works_as job occupation profession employed_as role is_a career".split())
_WORKPLACE = frozenset("works_at works_for employer employed_at employed_by workplace company".split())
_PLACE_WORDS = ("lives", "live", "living", "resides", "from", "grew", "born", "moved", "based", "hometown",
                "located", "city", "country", "address")
PEOPLE_WORDS = frozenset("sister brother mother mom mum father dad wife husband partner girlfriend boyfriend fiance "
                          "fiancee son daughter child children kid parent parents grandmother grandma grandfather "
                          "grandpa aunt uncle cousin niece nephew friend boss colleague coworker roommate flatmate "
                          "neighbour neighbor married spouse knows met family related sibling".split())


def shape_problem(item: dict, own_words: str) -> str:
    """Why a raw fact's subject or object does not fit its relation in what the user said ('' when it fits)."""
    relation = canonical_relation(str(item.get("relation", "")))
    subject, obj = str(item.get("subject", "")).strip(), str(item.get("object", "")).strip()
    if subject and not is_user(subject) and _norm(subject) == _norm(obj):
        return "the subject and the object are the same"
    if is_user(obj) and not _between_people(relation):
        return f"the user cannot be the object of {relation}"
    if subject and not is_user(subject) and roles(subject, own_words) and "subject" not in roles(subject, own_words):
        return "the subject is the object of the user's sentence"
    if (not subject or is_user(subject)) and _only_of_someone_else(obj, relation, own_words):
        return "said of someone else, not the user"
    return _object_problem(relation, obj, own_words)


def _only_of_someone_else(obj: str, relation: str, own_words: str) -> bool:
    """Whether the object stands only in clauses about another person ("My brother Tomás lives in Porto" does not
    say where the user lives), unless the fact is that person's tie to the user ("brother Tomás")."""
    wanted = [w.lower() for w in _WORD.findall(obj)]
    clauses = [[w.lower().replace("’", "'") for w in _WORD.findall(c)] for c in _CLAUSE.split(own_words)]
    holding = [c for c in clauses if wanted and _holds(c, wanted)]
    return bool(holding) and all(_someone_elses(c, relation) for c in holding)


def _holds(words: list[str], wanted: list[str]) -> bool:
    return any(words[i:i + len(wanted)] == wanted for i in range(len(words) - len(wanted) + 1))


def _someone_elses(clause: list[str], relation: str) -> bool:
    """A clause whose subject is "my <person>" and where the user is not a subject too ("My sister and I…")."""
    person = set(clause[1:3]) & PEOPLE_WORDS  # "my sister", "my older brother"
    if not clause or clause[0] not in ("my", "our") or not person:
        return False
    return not set(clause) & _FIRST_PERSON_SUBJECTS and not person & set(relation.split("_"))


def _object_problem(relation: str, obj: str, own_words: str) -> str:
    found = roles(obj, own_words)
    if not found:
        return ""
    kind = relation_kind(relation)
    if kind == "job" and found <= {"place"}:
        return f"a job is not a place: '{obj}' is where the user said"
    if kind in ("place", "workplace") and found <= {"role"}:
        return f"a place is not a role: '{obj}' is what the user said they are"
    if kind == "name" and found <= {"place"}:
        return f"a name is not a place: '{obj}' is where the user said"
    return ""


def relation_kind(relation: str) -> str:
    """job, workplace, place, name or '' (any other relation)."""
    words = set(relation.split("_"))
    if relation in _JOB or relation.startswith("works_as"):
        return "job"
    if relation in _WORKPLACE or relation.startswith(("works_at", "works_for", "employed_")):
        return "workplace"
    if relation in ("name", "called", "named", "first_name", "full_name", "nickname"):
        return "name"
    if words & set(_PLACE_WORDS):
        return "place"
    return ""


def from_the_user(item: dict) -> dict:
    """A tie to the user said the other way round, told from the user's side: (Tomás, brother_of, user) is (user,
    brother, Tomás), as the user said it ("My brother Tomás") and as a plain fact stores it."""
    relation = canonical_relation(str(item.get("relation", "")))
    subject = str(item.get("subject", "")).strip()
    kin = [w for w in relation.split("_") if w in PEOPLE_WORDS]
    if not is_user(str(item.get("object", ""))) or not subject or is_user(subject) or len(kin) != 1:
        return item
    return {**item, "subject": "user", "relation": kin[0], "object": subject}


def _between_people(relation: str) -> bool:
    return bool(set(relation.split("_")) & PEOPLE_WORDS)


def is_user(phrase: str) -> bool:
    return " ".join(phrase.lower().split()) in _USER


def roles(phrase: str, text: str) -> set[str]:
    """What the phrase is wherever it stands word for word in `text`: "place" (after a preposition of place),
    "role" (after "as", or what the user says they are), "object" (after the user's own verb or another
    preposition) or "subject" (anywhere else: it starts a clause, or follows a word that names it)."""
    wanted = [w.lower() for w in _WORD.findall(phrase)]
    if not wanted:
        return set()
    words = [w.lower().replace("’", "'") for w in _WORD.findall(text)]
    found = set()
    for at in range(len(words) - len(wanted) + 1):
        if words[at:at + len(wanted)] == wanted:
            found.add(_role(words, at))
    return found


def _role(words: list[str], at: int) -> str:
    before = at - 1
    while before >= 0 and words[before] in _DETERMINERS:
        before -= 1
    if before < 0:
        return "subject"
    word = words[before]
    if word in PLACE_PREPOSITIONS:
        return "place"
    if word in ("as", "i'm", "im", "we're"):
        return "role"  # "as a nurse", "I'm Maya", "I'm a nurse"
    if word in _BE and before > 0 and words[before - 1] in ("i", "we"):
        return "role"  # "I am Maya"
    if word in OTHER_PREPOSITIONS:
        return "object"
    if before > 0 and words[before - 1] in _FIRST_PERSON_SUBJECTS:
        return "object"  # "I love Lisbon", "I met Ana"
    return "subject"


def echoed_prompt(item: dict, prompt: str, own_words: str) -> str:
    """The words of the prompt's own instructions a fact copies ('' when none): a run of ECHO_RUN words, one of
    them at least a content word, that the prompt says and the user did not ("durable facts about the user")."""
    said, instructed = _runs(own_words), _runs(prompt)
    for part in ("subject", "object", "statement"):
        words = _WORD.findall(str(item.get(part, "")).lower())
        for run in _runs_of(words):
            if run in instructed and run not in said and set(run) - _ECHO_STOP:
                return " ".join(run)
    return ""


ECHO_RUN = 3
_ECHO_STOP = frozenset("a an the and or of to in on at for is are be as about user user's i my".split())


def _runs(text: str) -> set[tuple[str, ...]]:
    return set(_runs_of(_WORD.findall(text.lower())))


def _runs_of(words: list[str]) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + ECHO_RUN]) for i in range(len(words) - ECHO_RUN + 1)]


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))
