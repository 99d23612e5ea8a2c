"""The triple an edited statement says. A person who edits "The user is Lina." into "The user's name is Lina Costa."
means the fact (user, name, Lina Costa); keeping (user, name, Lina) would leave recall, reconcile and the graph on
the old words. The statement is read as the person would have said it ("My name is Lina Costa.") by the same
patterns that learn plain first-person facts (core.memory.said_facts); a statement they do not read keeps its
triple as it was."""
from __future__ import annotations

import re

from core.config import Settings
from core.memory.said_facts import said_facts
from core.second_person import to_second_person

_FIRST_PERSON = ((re.compile(r"^You are\b"), "I am"), (re.compile(r"^You were\b"), "I was"),
                 (re.compile(r"^Your\b"), "My"), (re.compile(r"^You\b"), "I"))


def first_person(statement: str) -> str:
    """"The user's name is Lina Costa." -> "My name is Lina Costa." (what it cannot turn stays as it is)."""
    said = to_second_person(statement.strip())
    for pattern, words in _FIRST_PERSON:
        if pattern.match(said):
            return pattern.sub(words, said, count=1)
    return said


def triple_of(statement: str) -> tuple[str, str, str] | None:
    """The one (subject, relation, object) the statement plainly says about the user, or None."""
    facts = said_facts(first_person(statement), "", 0.0, Settings()).facts
    if len(facts) != 1:
        return None
    fact = facts[0]
    return fact.subject, fact.relation, fact.object
