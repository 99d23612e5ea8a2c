"""Reconcile (MAGS): a new fact against similar stored facts — duplicate, update, contradiction or new.

A weak model's verdict never touches an unrelated fact: "duplicate", "update" or "contradiction" needs a target
of the same subject and relation, or one whose statement means nearly the same (Settings.grounding.
min_related_cosine), and a duplicate must name the same thing (an object word in common); otherwise the fact is
added as new and the outcome's reason says what was overruled. So where no stored fact is related at all, the
model is not asked (minutes a fact on a CPU, for a verdict that could only be "new"). What the person plainly said
is decided by what its relation means wherever the same subject and relation is stored
(core.memory.said_reconcile), not by the model.

Nothing is lost: a contradiction closes the old fact (valid_to, invalidated_at, superseded_by, an
'invalidate' history row) and links the new one with a 'supersedes' edge; a duplicate raises the
stored fact's confidence and access count (once a turn: a turn learned again adds no evidence). A pinned,
protected, permanent or critical fact is never closed or rewritten automatically: the conflict becomes a learning
goal that asks the user, the new fact waits in the trash meanwhile, and the answer (resolve_conflict) applies the
user's choice.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from core.config import Settings
from core.errors import EngramError, GenerationStopped, InvalidInput
from core.memory.critical import canonical_relation
from core.memory.engram import SAID, Fact
from core.memory.hebbian import touch
from core.memory.index import index_memories
from core.memory.said_reconcile import said_decision, stored
from core.prompts.reconcile import DECISIONS, reconcile_messages, reconcile_schema
from core.protocols import Embedder, StructuredModel
from core.store import edges, goals, vectors
from core.store.db import Database
from core.store.memories import (add_memory, get_memories, get_memory, invalidate_memory, link_sources,
                                 restore_memory, set_flag, trash_memory, update_memory)
from core.types import GoalId, LearningGoal, Memory, MemoryId


RECONCILE_MAX_TOKENS = 280  # the reason is at most 200 characters
NOTHING_RELATED = "nothing stored is about the same thing"


@dataclass(frozen=True)
class Outcome:
    decision: str  # duplicate / update / contradiction / new / asked
    memory_id: MemoryId | None  # the row now holding the fact (None when the user is asked)
    target_id: MemoryId | None = None  # the stored fact it was compared with
    goal_id: GoalId | None = None
    reason: str = ""


def similar_facts(db: Database, vector: np.ndarray, fact: Fact, limit: int) -> list[Memory]:
    """Stored active facts close to the new one: same subject and relation first, then nearest vectors."""
    same: dict[int, Memory] = {m.id: m for m in stored(db, fact.subject, fact.relation, limit)}
    near = [i for i, _ in vectors.knn(db, "memory", vector, limit * 3) if i not in same]
    found: dict[int, Memory] = {**same, **get_memories(db, near)}
    ordered = [found[i] for i in dict.fromkeys([*same, *near]) if i in found]
    return [m for m in ordered if m.is_active and m.kind != "summary"][:limit]


def reconcile_fact(db: Database, embedder: Embedder, model: StructuredModel, fact: Fact, episode_id: int | None,
                   settings: Settings, vector: np.ndarray | None = None, *,
                   stop: Callable[[], bool] | None = None) -> Outcome:
    """Store the fact as new, as a duplicate, update or contradiction of the closest stored fact the model names,
    or as a question to the user. `stop`: see StructuredModel.generate_json (GenerationStopped: nothing written)."""
    vector = embedder.embed([fact.statement])[0] if vector is None else vector
    said = said_decision(db, fact) if fact.found_by == SAID else None
    if said is not None:  # what its relation means decides, not a weak model's verdict
        decision, target, reason = said.decision, said.target, said.reason
    else:
        candidates = similar_facts(db, vector, fact, settings.generation.reconcile_candidates)
        # The model's verdict can act only on a related candidate (_model_decision): with none, it is not asked
        if not candidates:
            decision, target, reason = "new", None, "nothing similar stored"
        elif not any(related(db, fact, vector, c, settings) for c in candidates):
            decision, target, reason = "new", None, NOTHING_RELATED
        else:
            decision, target, reason = _model_decision(db, model, fact, vector, candidates, settings, stop)
    sources = [] if episode_id is None else [int(episode_id)]
    return apply_decision(db, embedder, fact, decision, target, sources, reason, settings)


def _model_decision(db: Database, model: StructuredModel, fact: Fact, vector: np.ndarray, candidates: list[Memory],
                    settings: Settings, stop: Callable[[], bool] | None) -> tuple[str, Memory | None, str]:
    """The model's verdict against the candidates, overruled where it would touch an unrelated fact. A plainly said
    fact the model fails to compare is kept as new: the person's own words are not lost to a model's error."""
    try:
        answer = model.generate_json(reconcile_messages(fact.statement, [c.statement for c in candidates]),
                                     reconcile_schema(len(candidates)), max_tokens=RECONCILE_MAX_TOKENS, stop=stop)
    except GenerationStopped:
        raise
    except EngramError as exc:
        if fact.found_by != SAID:
            raise
        return "new", None, f"the model could not compare it with what is stored ({exc}): kept as new"[:300]
    decision, reason = answer.get("decision", "new"), str(answer.get("reason", ""))[:200]
    index = int(answer.get("target", 0))
    target = candidates[index - 1] if 1 <= index <= len(candidates) else None
    if decision not in DECISIONS or (decision != "new" and target is None):
        return "new", None, reason
    if decision == "new" or target is None:  # target is None only with "new" (above)
        return decision, target, reason
    if not related(db, fact, vector, target, settings):
        return "new", None, (f"the model called it a {decision} of memory {target.id}, which is about something "
                             f"else: kept as new. {reason}")[:300]
    if decision == "duplicate" and not _names_the_same(fact, target):
        return "new", None, (f"the model called it a duplicate of memory {target.id}, which names "
                             f"{target.object!r}: kept as new. {reason}")[:300]
    return decision, target, reason


def related(db: Database, fact: Fact, vector: np.ndarray, target: Memory, settings: Settings) -> bool:
    """Is `target` about the same thing as the new fact: the same subject and relation, or a statement this close?"""
    same_subject = (target.subject or "").strip().lower() == fact.subject.strip().lower()
    if same_subject and canonical_relation(target.relation or "") == canonical_relation(fact.relation):
        return True
    stored = vectors.get_vectors(db, "memory", [target.id]).get(target.id)
    if stored is None:
        return False
    a, b = np.asarray(vector, dtype=np.float32), np.asarray(stored, dtype=np.float32)
    cosine = float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))
    return cosine >= settings.grounding.min_related_cosine


def _names_the_same(fact: Fact, target: Memory) -> bool:
    """A duplicate says the same thing again: its object shares a word with the stored one's ("Boston" and
    "Boston, MA"; not "Denver" and "Boston": taken as a duplicate, the new city would be lost). A stored fact with
    no object (a note, a summary) is not judged."""
    stored = set(re.findall(r"\w+", (target.object or "").casefold()))
    return not stored or bool(stored & set(re.findall(r"\w+", fact.object.casefold())))


def apply_decision(db: Database, embedder: Embedder, fact: Fact, decision: str, target: Memory | None,
                   sources: list[int], reason: str, settings: Settings) -> Outcome:
    if decision == "duplicate" and target is not None:
        return _duplicate(db, fact, target, sources, reason, settings)
    if decision in ("update", "contradiction") and target is not None and target.is_untouchable:
        return _ask_user(db, embedder, fact, target, decision, reason, sources)
    if decision == "update" and target is not None:
        with db.transaction():
            update_memory(db, target.id, statement=fact.statement, object=fact.object,
                          confidence=max(fact.confidence, target.confidence), reason=f"reconcile: update. {reason}")
            link_sources(db, target.id, sources)
        index_memories(db, embedder, [target.id])
        return Outcome("update", target.id, target.id, reason=reason)
    with db.transaction():  # the new fact and the closing of the old one land together or not at all
        new_id = _add(db, fact, sources)
        if decision == "contradiction" and target is not None:
            invalidate_memory(db, target.id, valid_to=fact.valid_from, superseded_by=new_id,
                              reason=f"reconcile: contradicted by memory {new_id}. {reason}")
            edges.set_edge(db, new_id, target.id, "supersedes", 1.0)
    index_memories(db, embedder, [new_id])
    return Outcome(decision if target is not None else "new", new_id, None if target is None else target.id,
                   reason=reason)


def _add(db: Database, fact: Fact, sources: list[int]) -> MemoryId:
    return add_memory(db, fact.statement, subject=fact.subject, relation=fact.relation, object=fact.object,
                      kind=fact.kind, critical=fact.critical, confidence=fact.confidence,
                      source_episode_ids=sources, valid_from=fact.valid_from, reason=f"engram ({fact.source})")


def learned_from(db: Database, statement: str, episode_id: int | None) -> MemoryId | None:
    """The memory (in any state: the user may have deleted it since) that holds this statement learned from this
    turn: a turn whose learning gave way half-way is learned again from the start, and what it stored stays once."""
    if episode_id is None:
        return None
    found = db.scalar("SELECT m.id FROM memories m JOIN memory_sources s ON s.memory_id = m.id "
                      "WHERE s.episode_id = ? AND lower(trim(m.statement)) = lower(trim(?)) LIMIT 1",
                      (int(episode_id), statement))
    return None if found is None else MemoryId(int(found))


def _duplicate(db: Database, fact: Fact, target: Memory, sources: list[int], reason: str,
               settings: Settings) -> Outcome:
    known = {int(r[0]) for r in db.execute("SELECT episode_id FROM memory_sources WHERE memory_id = ?", (target.id,))}
    if sources and set(sources) <= known:  # the same turn again (learned once more after giving way): no new evidence
        return Outcome("duplicate", target.id, target.id, reason=f"already learned from this turn. {reason}"[:300])
    confidence = min(1.0, max(target.confidence, fact.confidence) + settings.generation.duplicate_confidence_step)
    with db.transaction():
        update_memory(db, target.id, confidence=confidence, reason=f"reconcile: said again. {reason}")
        link_sources(db, target.id, sources)
        touch(db, [target.id])
    return Outcome("duplicate", target.id, target.id, reason=reason)


def _ask_user(db: Database, embedder: Embedder, fact: Fact, target: Memory, decision: str, reason: str,
              sources: list[int]) -> Outcome:
    """The new fact waits in the trash, out of recall, until the user says which one holds (resolve_conflict)."""
    flags = [n for n in ("pinned", "protected", "permanent", "critical") if getattr(target, n)]
    question = (f'You told me "{fact.statement[:300]}", but I have "{target.statement[:300]}" '
                f"({', '.join(flags)}). Which one is true now?")
    with db.transaction():
        waiting = _add(db, fact, sources)
        trash_memory(db, waiting, reason=f"waiting for your answer: it conflicts with {'/'.join(flags)} memory "
                                         f"{target.id}")
        goal_id = goals.open_goal(db, question, reason=f"reconcile: {decision} of a {'/'.join(flags)} memory",
                                  memory_ids=[target.id, waiting])
    index_memories(db, embedder, [waiting])  # restorable with its vector, like any trashed memory
    return Outcome("asked", None, target.id, goal_id=goal_id, reason=reason)


def conflict_of(goal: LearningGoal) -> tuple[MemoryId, MemoryId] | None:
    """(the stored memory, the new one waiting in the trash) when the goal asks about a conflict, else None."""
    ids = list(goal.memory_ids)
    return (MemoryId(ids[0]), MemoryId(ids[1])) if goal.reason.startswith("reconcile:") and len(ids) == 2 else None


def resolve_conflict(db: Database, goal_id: int, keep: str, answer: str = "") -> LearningGoal:
    """The user's answer to a conflict question: keep "new" (it replaces the stored memory, which is closed and
    kept in history, its pin and protection carried over) or "old" (the new one stays in the trash)."""
    goal = goals.get_goal(db, goal_id)
    pair = conflict_of(goal)
    if pair is None:
        raise InvalidInput(f"learning goal {goal.id} is not a question about two conflicting memories")
    if keep not in ("new", "old"):
        raise InvalidInput(f"keep must be 'new' or 'old', not {keep!r}")
    old, new = pair
    with db.transaction():
        if keep == "new":
            _replace(db, old, new, goal.id)
        return goals.close_goal(db, goal.id, answer or ("the new one" if keep == "new" else "what you had"))


def _replace(db: Database, old_id: MemoryId, new_id: MemoryId, goal_id: int) -> None:
    old, new = get_memory(db, old_id), get_memory(db, new_id)
    if new.deleted_at is None and new.forgotten_at is None and not new.is_active:
        raise InvalidInput(f"memory {new.id} can no longer replace memory {old.id}")
    if new.deleted_at is not None or new.forgotten_at is not None:
        restore_memory(db, new.id, reason=f"you chose it over memory {old.id} (learning goal {goal_id})")
    for flag in ("pinned", "protected"):
        if getattr(old, flag):
            set_flag(db, new.id, flag, True, reason=f"carried over from memory {old.id}, which it replaces")
    if old.invalidated_at is None:
        invalidate_memory(db, old.id, valid_to=new.valid_from, superseded_by=new.id,
                          reason=f"you chose memory {new.id} instead (learning goal {goal_id})")
    edges.set_edge(db, new.id, old.id, "supersedes", 1.0)
