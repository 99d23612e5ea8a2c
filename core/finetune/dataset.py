"""The training set a fine-tune learns from, built only from what the user let Engram keep.

- confirmed facts (active semantic memories held with enough confidence, or pinned/protected) become
  question/answer pairs in several phrasings; one more phrasing is held out as the gate's fact probe;
- confirmed hypotheses (the user's preferences) become short demonstrations of the preferred behaviour, with
  one more phrasing held out as the gate's preference probe;
- conversations the user rated good become chat examples.
Trashed, forgotten, invalidated, rejected and incognito content never enters it: the queries below read
only active rows, and an episode whose metadata says incognito (or a memory learned from one)
is skipped.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from core.store.db import Database

# Training phrasings and the held-out probe phrasing never overlap, so the probe measures recall of the
# fact, not of a memorised question.
TRAIN_QUESTIONS = (
    "What do you know about {topic}?",
    "Tell me about {topic}.",
    "What is true about {topic}?",
)
PROBE_QUESTION = "Remind me, what do you remember about {topic}?"
STYLE_QUESTIONS = (
    "How should you answer me?",
    "What have you learned about how I like things?",
)
PREFERENCE_PROBE_QUESTION = "Remind me, what do I prefer?"
MIN_FACT_CONFIDENCE = 0.6
_INCOGNITO = "coalesce(json_extract(e.metadata, '$.incognito'), 0) NOT IN (0, 'false')"


@dataclass(frozen=True)
class Probe:
    """A held-out question whose answer the adapter should now find likelier: about a fact (kind "fact",
    item_id a memory) or a confirmed preference (kind "preference", item_id a hypothesis)."""

    question: str
    answer: str
    item_id: int
    kind: str = "fact"


@dataclass(frozen=True)
class TrainingSet:
    examples: list[dict[str, Any]] = field(default_factory=list)  # mlx-lm chat format: {"messages": [...]}
    probes: list[Probe] = field(default_factory=list)
    memory_ids: list[int] = field(default_factory=list)
    episode_ids: list[int] = field(default_factory=list)
    hypothesis_ids: list[int] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not self.examples


def build_training_set(db: Database, *, seed: int = 0, system_prompt: str = "") -> TrainingSet:
    facts = _confirmed_facts(db)
    hypotheses = _confirmed_hypotheses(db)
    episodes = _good_conversations(db)
    examples: list[dict[str, Any]] = []
    probes = []
    for fact in facts:
        topic = fact_topic(fact)
        for template in TRAIN_QUESTIONS:
            examples.append(_chat(system_prompt, template.format(topic=topic), fact["statement"]))
        probes.append(Probe(PROBE_QUESTION.format(topic=topic), fact["statement"], fact["id"]))
    for hypothesis in hypotheses:
        for question in STYLE_QUESTIONS:
            examples.append(_chat(system_prompt, question, hypothesis["claim"]))
        probes.append(Probe(PREFERENCE_PROBE_QUESTION, hypothesis["claim"], hypothesis["id"], "preference"))
    for episode in episodes:
        examples.append(_chat(system_prompt, episode["user_text"], episode["assistant_text"]))
    random.Random(seed).shuffle(examples)
    return TrainingSet(examples=examples, probes=probes, memory_ids=[f["id"] for f in facts],
                       episode_ids=[e["id"] for e in episodes], hypothesis_ids=[h["id"] for h in hypotheses])


def fact_topic(fact: dict[str, Any]) -> str:
    """What a question about the fact names: 'subject relation' from the triple, else the statement's opening."""
    subject = (fact.get("subject") or "").strip()
    relation = (fact.get("relation") or "").replace("_", " ").strip()
    if subject:
        return f"{subject} {relation}".strip()
    words = fact["statement"].rstrip(".!?").split()
    return " ".join(words[: max(1, min(4, len(words) - 1))])


def _chat(system_prompt: str, user: str, assistant: str) -> dict[str, Any]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return {"messages": messages}


def _confirmed_facts(db: Database) -> list[dict[str, Any]]:
    return db.query(
        f"""SELECT m.id, m.statement, m.subject, m.relation, m.object FROM active_memories m
            WHERE m.kind = 'semantic' AND (m.confidence >= ? OR m.pinned OR m.protected)
              AND NOT EXISTS (  -- learned in an incognito conversation
                  SELECT 1 FROM memory_sources s JOIN episodes e ON e.id = s.episode_id
                  WHERE s.memory_id = m.id AND {_INCOGNITO})
            ORDER BY m.id""", (MIN_FACT_CONFIDENCE,))


def _confirmed_hypotheses(db: Database) -> list[dict[str, Any]]:
    return db.query("SELECT id, claim FROM hypotheses WHERE status = 'confirmed' ORDER BY id")


def _good_conversations(db: Database) -> list[dict[str, Any]]:
    return db.query(
        f"""SELECT e.id, e.user_text, e.assistant_text FROM episodes e
            LEFT JOIN sessions s ON s.id = e.session_id
            WHERE e.rating = 1 AND e.deleted_at IS NULL AND e.forgotten_at IS NULL AND e.assistant_text != ''
              AND s.deleted_at IS NULL AND NOT ({_INCOGNITO})
            ORDER BY e.id""")
