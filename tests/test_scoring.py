"""Recall's named score functions (core.memory.scoring), checked against the formulas they document."""
from __future__ import annotations

import pytest

from core.errors import InvalidInput
from core.memory import scoring as s

W = s.ScoringWeights()
DAY = s.SECONDS_PER_DAY


def test_vector_similarity_maps_the_floor_to_zero_and_identity_to_one():
    assert s.vector_similarity(0.0, 0.1) == 1.0
    assert s.vector_similarity(0.9, 0.1) == 0.0  # cosine 0.1: unrelated sentences
    assert s.vector_similarity(1.5, 0.1) == 0.0  # opposite directions never go negative
    assert s.vector_similarity(0.45, 0.1) == pytest.approx(0.5)


def test_bm25_is_a_share_of_the_best_match():
    assert s.bm25_normalised(-6.0, -12.0) == pytest.approx(0.5)
    assert s.bm25_normalised(-12.0, -12.0) == 1.0
    assert s.bm25_normalised(0.0, -12.0) == 0.0 and s.bm25_normalised(-3.0, 0.0) == 0.0  # no match, no best


def test_fusion_is_the_weighted_mean_of_both_retrievers():
    assert s.fused(1.0, 0.0, W) == pytest.approx(0.6) and s.fused(0.0, 1.0, W) == pytest.approx(0.4)
    assert s.fused(0.5, 0.5, s.preset("keyword")) == pytest.approx(0.5)
    assert s.fused(1.0, 1.0, s.ScoringWeights(vector_weight=0.0, bm25_weight=0.0)) == 0.0


def test_context_speaker_and_graph_shares():
    assert s.with_context(0.5, 0.4, 0.2, W) == pytest.approx(0.5 + 0.6 * 0.4 + 0.35 * 0.2)
    assert s.speaker_bonus(0.5, True, W) == pytest.approx(0.15) and s.speaker_bonus(0.5, False, W) == 0.0
    assert s.graph_boost(0.8, 0.5, W) == pytest.approx(0.3 * 0.5 * 0.8)


def test_recency_halves_every_half_life_from_its_cap():
    assert s.recency(0, 30, 0.15) == pytest.approx(0.15)
    assert s.recency(30 * DAY, 30, 0.15) == pytest.approx(0.075)
    assert s.recency(60 * DAY, 30, 0.15) == pytest.approx(0.0375)
    assert s.recency(-5, 30, 0.15) == pytest.approx(0.15)  # a clock step back never makes it newer than new
    assert s.recency(10 * DAY, 0, 0.15) == 0.0  # no half-life: recency plays no part


def test_retrieval_score_is_seed_004s_formula():
    relevance, recent = 0.6, 0.1
    assert s.nostalgia(recent) == pytest.approx(0.9)
    assert s.retrieval_score(relevance, recent, 0.9) == pytest.approx((0.6 * 0.9 + 0.1) * 0.9)
    assert s.retrieval_score(0.6, 0.0, 1.0) == pytest.approx(0.6)  # no recency: relevance alone
    # an old but relevant memory still beats a new irrelevant one
    assert s.retrieval_score(0.8, 0.0, 1.0) > s.retrieval_score(0.0, W.recency_cap, 1.0)


def test_final_score_rewards_importance_and_discounts_doubt():
    assert s.final_score(0.5, 0.0, 1.0, W) == pytest.approx(0.5)
    assert s.final_score(0.5, 1.0, 1.0, W) == pytest.approx(0.5 * 1.2)
    assert s.final_score(0.5, 0.0, 0.0, W) == pytest.approx(0.25)  # confidence floor 0.5
    assert s.final_score(0.5, -3.0, 7.0, W) == pytest.approx(0.5)  # out-of-range inputs are clamped


def test_presets_are_named_and_an_unknown_one_is_refused():
    assert s.preset("archive").recency_cap == 0.0 and s.preset("recent").recency_cap == 0.5
    with pytest.raises(InvalidInput, match="unknown recall preset 'fastest'"):
        s.preset("fastest")
