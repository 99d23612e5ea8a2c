"""Recall's score functions, each named and documented, and the weight presets in ONE place (PRESETS).

A recall result's relevance comes from fusing two retrievers (vector similarity and BM25), spreading a
little of it to neighbouring turns and through strong graph edges, then it is rescored (seed 004):

    retrieval = ((relevance × (1 − recency)) + recency) × type_weight

with recency ∈ [0, recency_cap] (the "nostalgia" term 1 − recency lets an old but relevant memory keep its
relevance), and finally blended with the memory's importance and confidence.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from core.errors import InvalidInput

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class ScoringWeights:
    vector_weight: float = 0.6  # share of the calibrated vector similarity in the fused score
    bm25_weight: float = 0.4  # share of the normalised BM25 score in the fused score
    similarity_floor: float = 0.1  # cosine below this counts as no semantic match at all
    neighbour_weight: float = 0.6  # share of the best adjacent turn's score an episode inherits
    answer_weight: float = 0.9  # that share when the adjacent turn is the question this turn replies to
    question_share: float = 0.8  # share of its relevance a turn that only asks keeps (its reply inherits it)
    session_weight: float = 0.35  # share of its session's best score an episode inherits
    speaker_weight: float = 0.3  # bonus share for a turn whose speaker the query names ("what did Ana say...")
    graph_weight: float = 0.3  # share of a seed memory's score passed along a strong edge (× edge weight)
    recency_cap: float = 0.15  # recency of a brand-new item; keeps relevance dominant
    importance_weight: float = 0.2  # final × (1 + w · importance)
    confidence_floor: float = 0.5  # final × (floor + (1 − floor) · confidence)
    type_weights: dict[str, float] = field(default_factory=lambda: {
        "semantic": 1.0, "episodic": 0.95, "summary": 0.9, "episode": 0.9})


PRESETS: dict[str, ScoringWeights] = {
    # Everyday use: facts and conversation turns both count; a little recency.
    "balanced": ScoringWeights(),
    # Exact words matter more (names, codes, places).
    "keyword": ScoringWeights(vector_weight=0.3, bm25_weight=0.7),
    # Meaning matters more (paraphrases, questions about feelings or topics).
    "semantic": ScoringWeights(vector_weight=0.7, bm25_weight=0.3),
    # What happened lately first.
    "recent": ScoringWeights(recency_cap=0.5),
    # Old memories as much as new ones: no recency at all.
    "archive": ScoringWeights(recency_cap=0.0),
}


def preset(name: str) -> ScoringWeights:
    try:
        return PRESETS[name]
    except KeyError:
        raise InvalidInput(f"unknown recall preset {name!r}; choose one of {', '.join(PRESETS)}") from None


def vector_similarity(cosine_distance: float, floor: float) -> float:
    """Cosine similarity rescaled so `floor` → 0 and 1 → 1: unrelated sentences still have cosine ~0.1."""
    similarity = 1.0 - cosine_distance
    return max(0.0, (similarity - floor) / (1.0 - floor))


def bm25_normalised(score: float, best: float) -> float:
    """FTS5's bm25() is negative, lower is better; this is the share of the best match's score in [0, 1]."""
    if best >= 0 or score >= 0:
        return 0.0
    return min(1.0, score / best)


def fused(similarity: float, bm25: float, weights: ScoringWeights) -> float:
    """Convex combination of the calibrated retriever scores (beats reciprocal-rank fusion on LoCoMo)."""
    total = weights.vector_weight + weights.bm25_weight
    return (weights.vector_weight * similarity + weights.bm25_weight * bm25) / total if total else 0.0


def with_context(own: float, neighbour: float, session: float, weights: ScoringWeights,
                 replies: bool = False) -> float:
    """An episode's relevance: its own score plus a share of its best adjacent turn's and its session's.
    `replies`: that adjacent turn is a question just before this one, which this turn answers."""
    return own + neighbour_share(replies, weights) * neighbour + weights.session_weight * session


def neighbour_share(replies: bool, weights: ScoringWeights) -> float:
    """What a turn inherits of an adjacent turn's score: more from the question it replies to, since the
    reply holds what the question matched only in words (LoCoMo dev R@10 +0.007 with question_share)."""
    return weights.answer_weight if replies else weights.neighbour_weight


def as_asked(relevance: float, asks_only: bool, weights: ScoringWeights) -> float:
    """A turn that only asks ("What did you buy?") is rarely what a later query wants, its reply is: it keeps
    `question_share` of its relevance (LoCoMo dev: 4% of such turns in a top 10 are evidence, 12% of others)."""
    return weights.question_share * relevance if asks_only else relevance


def speaker_bonus(own: float, named: bool, weights: ScoringWeights) -> float:
    """A turn by the person the query asks about counts a little more (a share of its own relevance)."""
    return weights.speaker_weight * own if named else 0.0


def graph_boost(seed_score: float, edge_weight: float, weights: ScoringWeights) -> float:
    """What a memory gains from a strongly linked memory that matched (one hop only)."""
    return weights.graph_weight * edge_weight * seed_score


def recency(age_seconds: float, half_life_days: float, cap: float) -> float:
    """Short-term exponential decay (Exocortex): `cap` for a new item, halving every half-life."""
    if half_life_days <= 0:
        return 0.0
    return cap * math.pow(0.5, max(0.0, age_seconds) / (half_life_days * SECONDS_PER_DAY))


def nostalgia(recency_score: float) -> float:
    """Seed 004's counterweight: the share of relevance kept is 1 − recency."""
    return 1.0 - recency_score


def retrieval_score(relevance: float, recency_score: float, type_weight: float) -> float:
    """Seed 004: ((relevance × (1 − recency)) + recency) × type weight."""
    return (relevance * nostalgia(recency_score) + recency_score) * type_weight


def final_score(retrieval: float, importance: float, confidence: float, weights: ScoringWeights) -> float:
    """Blend in importance (a bonus) and confidence (a doubtful fact counts for less)."""
    importance_factor = 1.0 + weights.importance_weight * max(0.0, importance)
    confidence_factor = weights.confidence_floor + (1.0 - weights.confidence_floor) * min(1.0, max(0.0, confidence))
    return retrieval * importance_factor * confidence_factor
