"""Critical facts (R-Memory): typed relations that must reach the context whatever their similarity.

Relations are canonicalised so "is allergic to" and "allergy" land on one name; an intent classifier
(keywords plus embeddings of intent descriptions, no extra model) maps a request to the relations
that go first into the context.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from core.protocols import Embedder
from core.store.db import Database
from core.types import MemoryId

# Canonical relation ← stems found in a free-form relation.
CANONICAL = {
    "allergy": ("allerg", "intoleran", "anaphyla"),
    "medication": ("medicat", "takes_", "prescri", "drug", "dose"),
    "condition": ("condition", "diagnos", "disease", "illness", "disorder", "suffers_from"),
    "diet": ("diet", "vegetarian", "vegan", "halal", "kosher", "gluten", "does_not_eat", "doesnt_eat"),
    "hard_constraint": ("constraint", "must_not", "cannot", "can_not", "never", "must_always", "avoid"),
    "emergency_contact": ("emergency",),
    "blood_type": ("blood_type",),
}
CRITICAL_RELATIONS = frozenset(CANONICAL)


@dataclass(frozen=True)
class Intent:
    name: str
    keywords: tuple[str, ...]
    description: str
    relations: tuple[str, ...]
    examples: tuple[str, ...] = ()  # requests of this intent; the classifier embeds them once


INTENTS: tuple[Intent, ...] = (
    Intent("medication", ("medic", "antibiot", "pill", "drug", "prescri", "dose", "pharma", "tablet", "ibuprofen",
                          "painkiller", "vaccin", "doctor", "symptom", "sick", "fever", "infection"),
           "asking for a medicine, antibiotic, prescription, treatment or medical advice",
           ("allergy", "medication", "condition"),
           ("what medicine should I take", "my head hurts, what can I take for it", "I feel ill and have a sore throat",
            "is it safe to take this with my pills", "I need a treatment for my cough")),
    Intent("diet", ("food", "eat", "meal", "recipe", "cook", "restaurant", "dinner", "lunch", "breakfast", "snack",
                    "menu", "bake", "ingredient"),
           "asking about food, a recipe, a restaurant or what to eat",
           ("allergy", "diet", "condition", "hard_constraint"),
           ("what should I eat tonight", "find me a good restaurant", "give me a recipe for dinner",
            "I'm hungry, any ideas for food", "where can I get sushi nearby")),
    Intent("travel", ("travel", "trip", "flight", "fly", "hotel", "vacation", "holiday", "abroad", "visa",
                      "journey", "airport", "pack"),
           "planning a trip, a flight, a hotel or a holiday",
           ("allergy", "medication", "condition", "hard_constraint", "diet"),
           ("I'm planning a trip abroad", "help me plan my holiday", "what should I pack for my journey",
            "I'm going to Japan next month", "find me a hotel in Rome")),
    Intent("scheduling", ("schedule", "meeting", "appointment", "calendar", "book", "remind", "tomorrow",
                          "next week", "deadline", "plan my"),
           "scheduling a meeting, an appointment or a reminder",
           ("hard_constraint", "condition"),
           ("set up a meeting on Thursday", "put an appointment in my calendar", "remind me to call my mother",
            "when am I free next week", "arrange a call with my colleague")),
    Intent("activity", ("exercise", "run", "gym", "hike", "sport", "workout", "swim", "climb"),
           "planning exercise, sport or physical activity",
           ("condition", "medication", "hard_constraint"),
           ("plan a workout for me", "I want to start running", "suggest a hike this weekend",
            "what exercise should I do today", "I'm training for a marathon")),
)


def canonical_relation(relation: str) -> str:
    """A relation in snake_case, mapped to its canonical critical name when it is one."""
    slug = re.sub(r"[^a-z0-9]+", "_", relation.lower()).strip("_")
    for name, stems in CANONICAL.items():
        if slug == name or any(stem in slug for stem in stems):
            return name
    return slug


def is_critical(relation: str) -> bool:
    return canonical_relation(relation) in CRITICAL_RELATIONS


@dataclass
class IntentClassifier:
    """Keywords first; otherwise the intents whose closest example request is above a cosine threshold."""
    embedder: Embedder | None = None
    threshold: float = 0.45
    intents: Sequence[Intent] = INTENTS
    _vectors: list[np.ndarray] | None = field(default=None, repr=False)

    def classify(self, text: str, embedding: Callable[[], np.ndarray] | None = None) -> list[Intent]:
        """`embedding`: the text's vector when asked for (the turn's, made already for recall)."""
        lowered = text.lower()
        found = [i for i in self.intents if any(re.search(rf"\b{re.escape(k)}", lowered) for k in i.keywords)]
        if found or self.embedder is None:
            return found
        vector = self.embedder.embed([text])[0] if embedding is None else embedding()
        return [i for i, s in zip(self.intents, self.scores(vector)) if s >= self.threshold]

    def scores(self, vector: np.ndarray) -> list[float]:
        """Per intent, the cosine of the query with its closest example request (or its description)."""
        if self._vectors is None:
            assert self.embedder is not None, "scores() without an embedder"  # matches() returns before
            texts = [list(i.examples) or [i.description] for i in self.intents]
            self._vectors = [self.embedder.embed(t) for t in texts]
        query = np.asarray(vector, dtype=np.float32)
        return [float((examples @ query).max()) for examples in self._vectors]


def relations_for(intents: Sequence[Intent]) -> list[str]:
    seen: dict[str, None] = {}
    for intent in intents:
        seen.update(dict.fromkeys(intent.relations))
    return list(seen)


def critical_memory_ids(db: Database, relations: Sequence[str], limit: int) -> list[MemoryId]:
    """Active memories of the given relations, critical ones first, then by confidence."""
    if not relations or limit <= 0:
        return []
    marks = ",".join("?" * len(relations))
    return [MemoryId(r[0]) for r in db.execute(
        f"SELECT id FROM active_memories WHERE relation IN ({marks}) "
        "ORDER BY critical DESC, confidence DESC, id DESC LIMIT ?", [*relations, int(limit)])]

