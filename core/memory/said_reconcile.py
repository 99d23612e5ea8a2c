"""Reconcile for what the person plainly said (core.memory.said_facts), decided by what its relation means wherever
the store already holds the same subject and relation — no model asked.

Asked "I moved to Porto" against "The user lives in Lisbon", SmolLM2-135M (what a fresh install here runs, near
what an 8 GB Mac runs) answers at random, and "new" left both cities active. The relation says it instead: a person
lives in one place and has one name, so the newer one supersedes the stored one (closed, kept in history); a
second sister or a second liking is a fact of its own; the same thing said again is a duplicate; "Mochi, not
Miso" closes Miso; "I hate loud music" closes "likes loud music". Where nothing of that subject and relation is
stored, the model compares as for any fact (reconcile.reconcile_fact), and a pinned, protected, permanent or
critical memory is still never closed without asking (reconcile.apply_decision).
"""
from __future__ import annotations

from dataclasses import dataclass

from core.memory.engram import Fact
from core.memory.said_facts import names_the_same
from core.store.db import Database
from core.store.memories import get_memories
from core.types import Memory

# A person has one of each at a time: a new one supersedes the stored one. (Where they come from or grew up is
# not here: "Portugal" and "Lisbon" can both hold; "not X" still corrects it.)
ONE_AT_A_TIME = frozenset(("name", "lives_in", "works_as", "works_at", "birthday", "diet"))
OPPOSITE = {"likes": "dislikes", "dislikes": "likes"}


@dataclass(frozen=True)
class SaidDecision:
    decision: str  # duplicate / contradiction / new, as reconcile's
    target: Memory | None
    reason: str


def said_decision(db: Database, fact: Fact) -> SaidDecision | None:
    """The decision for a plainly said fact, or None where nothing of its subject and relation is stored."""
    same = stored(db, fact.subject, fact.relation)
    named = [m for m in same if fact.replaces and names_the_same(m.object or "", fact.replaces)]
    if named:
        return SaidDecision("contradiction", named[0], f"the user said it is {fact.object}, not {fact.replaces}")
    told = [m for m in same if names_the_same(m.object or "", fact.object)]
    if told:
        return SaidDecision("duplicate", told[0], "the user said it again")
    opposite = OPPOSITE.get(fact.relation)
    flipped = [m for m in stored(db, fact.subject, opposite) if names_the_same(m.object or "", fact.object)] \
        if opposite else []
    if flipped:
        return SaidDecision("contradiction", flipped[0], f"the opposite of the stored {flipped[0].statement!r}")
    if same and one_at_a_time(fact.relation):
        return SaidDecision("contradiction", same[0], f"one {fact.relation} at a time: the newer one holds")
    if same:
        return SaidDecision("new", None, f"one more {fact.relation} beside {len(same)} stored")
    return None


def one_at_a_time(relation: str) -> bool:
    return relation in ONE_AT_A_TIME or relation.startswith("favourite_")


def stored(db: Database, subject: str, relation: str, limit: int = 50) -> list[Memory]:
    """The active facts of this subject and relation, newest first (summaries are not facts)."""
    ids = [r[0] for r in db.execute(
        "SELECT id FROM active_memories WHERE kind != 'summary' AND lower(subject) = lower(?) AND relation = ? "
        "ORDER BY id DESC LIMIT ?", (subject, relation, int(limit)))]
    found = get_memories(db, ids)
    return [found[i] for i in ids if i in found]
