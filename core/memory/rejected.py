""""This is wrong": a memory the user rejects leaves recall, and learning never keeps the same fact again.

A fact counts as the same when its statement is (case, spacing, punctuation and a leading article aside), or when
its triple is: the model words one fact differently from turn to turn ("User likes coffee." / "The user likes
coffee"), but extracts the same subject, relation and object. Only hashes of these are stored (core.store.
rejections), so purging the rejected memory still removes its text from the file.
"""
from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from core.memory.critical import canonical_relation
from core.store import memories, rejections
from core.store.db import Database
from core.types import Memory

if TYPE_CHECKING:  # the extraction's types, not its module: `memory add` needs only keys_of (issue 41.3)
    from core.memory.engram import Extraction, Fact

REASON = "you said this is wrong"  # the dropped item's reason, counted like the other reasons for leaving a fact out
USER_WORDS = frozenset(("user", "the user", "i", "me", "myself"))
_ARTICLE = re.compile(r"^(the|a|an)\s+")
_PUNCTUATION = re.compile(r"[^\w\s]")


def _plain(text: str) -> str:
    words = " ".join(_PUNCTUATION.sub(" ", str(text).casefold()).split())
    return _ARTICLE.sub("", words)


def _relation(relation: str) -> str:
    """"loves" and "love", "lives_in" and "live_in": one crude stem per word is enough to match a rewording."""
    words = canonical_relation(relation).split("_")
    return "_".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words)


def _hash(kind: str, text: str) -> str:
    return f"{kind}:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


def keys_of(statement: str, subject: str = "", relation: str = "", obj: str = "") -> list[str]:
    """The keys a rejection is stored and looked up by: the statement's, and the triple's when it has one."""
    keys = [_hash("s", _plain(statement))] if _plain(statement) else []
    if relation.strip() and obj.strip():
        who = "user" if _plain(subject) in USER_WORDS or not subject.strip() else _plain(subject)
        keys.append(_hash("t", f"{who}|{_relation(relation)}|{_plain(obj)}"))
    return keys


def memory_keys(memory: Memory) -> list[str]:
    return keys_of(memory.statement, memory.subject, memory.relation, memory.object)


def fact_keys(fact: Fact) -> list[str]:
    return keys_of(fact.statement, fact.subject, fact.relation, fact.object)


def reject(db: Database, memory_id: int, reason: str = "") -> Memory:
    """Trash the memory (restorable: restoring it lifts the rejection) and remember that it is wrong, together."""
    from core.memory.replaced import reopen_replaced  # its statement patterns take 0.14 s to compile
    with db.transaction():
        memory = memories.trash_memory(db, memory_id, reason or "you said this is wrong")
        rejections.add_keys(db, memory_keys(memory), memory.id)
        reopen_replaced(db, memory.id)  # what it had replaced holds again
    return memory


def is_rejected(db: Database, fact: Fact) -> bool:
    return bool(rejections.rejected_keys(db, fact_keys(fact)))


def drop_rejected(db: Database, extraction: Extraction) -> int:
    """Move the facts the user rejected from `extraction.facts` to its dropped items; returns how many."""
    kept, dropped = [], 0
    for fact in extraction.facts:
        if is_rejected(db, fact):
            extraction.dropped.append((_raw(fact), REASON))
            dropped += 1
        else:
            kept.append(fact)
    extraction.facts = kept
    return dropped


def _raw(fact: Fact) -> dict[str, Any]:
    return {"subject": fact.subject, "relation": fact.relation, "object": fact.object,
            "statement": fact.statement, "source": fact.source}
