"""The recall-blend learner alone (core.memory.recall_learning, core.memory.online_logistic): the terms read back
from recall's breakdown, the direction of each signal, bounds under any sequence of signals, the factor recall
applies and its floor for shielded memories, what a reply keeps, a damaged record, describe and reset."""
from __future__ import annotations

import json
import math
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import given, settings as hyp_settings, strategies as st

from core.config import Settings
from core.memory import recall_learning as rl
from core.memory import scoring
from core.store.episodes import add_episode

BALANCED = scoring.preset("balanced")
NUMBER = st.floats(allow_nan=True, allow_infinity=True, width=64)
TERMS = st.lists(NUMBER, min_size=len(rl.TERMS), max_size=len(rl.TERMS))
SIGNAL = st.tuples(TERMS, st.sampled_from([0.0, 1.0]), st.sampled_from([1.0, rl.RATING_WEIGHT]))


def breakdown(meaning: float, words: float, graph: float = 0.0, fresh: float = 0.0, importance: float = 0.0,
              weights: scoring.ScoringWeights = BALANCED) -> dict[str, float]:
    own = scoring.fused(meaning, words, weights)
    return {"similarity": meaning, "own": own, "graph": graph, "relevance": own + graph,
            "recency": weights.recency_cap * fresh, "importance": importance}


class Hit:
    def __init__(self, kind: str, id_: int, b: dict[str, float]) -> None:
        self.kind, self.id, self.breakdown = kind, id_, b


@pytest.mark.parametrize("preset", ["balanced", "keyword", "semantic"])
def test_the_terms_are_read_back_from_recalls_breakdown(preset):
    weights = scoring.preset(preset)
    b = breakdown(0.5, 0.8, graph=0.1, fresh=0.25, importance=0.7, weights=weights)
    assert rl.terms(b, weights) == pytest.approx((0.5, 0.8, round(0.1 / b["relevance"], 3), 0.25, 0.7), abs=1e-3)


def test_archive_has_no_recency_and_a_damaged_breakdown_stays_in_range():
    archive = scoring.preset("archive")
    assert rl.terms(breakdown(0.4, 0.2, fresh=0.0, weights=archive), archive)[3] == 0.0
    assert all(0.0 <= t <= 1.0 for t in rl.terms({"similarity": math.nan, "own": math.inf, "importance": 7},
                                                   BALANCED))


def test_a_veto_lowers_the_term_that_set_the_memory_apart_and_a_pin_raises_it():
    word_only = (-0.3, 0.6, 0.0, 0.0, 0.0)  # less meaning, more shared words than its reply-mates
    vetoed = rl.updated(rl.RecallBlend(), [(word_only, 0.0, 1.0)], vetoes=1)
    assert vetoed.weights[1] < 0 < vetoed.weights[0] and vetoed.weights[2:] == (0.0, 0.0, 0.0)
    assert vetoed.vetoes == 1 and vetoed.signals == 1
    pinned = rl.updated(rl.RecallBlend(), [(word_only, 1.0, 1.0)], pins=1)
    assert pinned.weights[1] > 0 > pinned.weights[0]
    mild = rl.updated(rl.RecallBlend(), [(word_only, 0.0, rl.RATING_WEIGHT)], rated_down=1)
    assert vetoed.weights[1] < mild.weights[1] < 0  # a thumb counts less than a veto


def test_a_memory_like_its_reply_mates_teaches_nothing():
    assert rl.updated(rl.RecallBlend(), [((0.0,) * 5, 0.0, 1.0)]).weights == (0.0,) * 5


@hyp_settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(signals=st.lists(SIGNAL, max_size=80))
def test_weights_stay_within_bounds_and_storable_whatever_the_signals(signals):
    blend = rl.RecallBlend()
    for x, y, weight in signals:
        blend = rl.updated(blend, [(x, y, weight)], vetoes=1)
        assert all(-rl.BOUND <= w <= rl.BOUND and math.isfinite(w) for w in blend.weights)
    assert rl._parsed(json.loads(json.dumps(asdict(blend)))) == blend


def test_the_same_signal_over_and_over_stops_at_the_bound():
    blend = rl.RecallBlend()
    for _ in range(2000):
        blend = rl.updated(blend, [((0.0, 1.0, 0.0, 0.0, 0.0), 0.0, 1.0)])
    assert -rl.BOUND <= blend.weights[1] < -0.8


@hyp_settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(weights=st.lists(st.floats(-rl.BOUND, rl.BOUND), min_size=5, max_size=5),
       items=st.lists(st.tuples(TERMS, st.booleans()), min_size=1, max_size=30))
def test_recalls_factor_stays_within_half_and_double_and_never_lowers_a_shielded_memory(weights, items):
    blend = rl.RecallBlend(weights=tuple(weights))
    breakdowns = [breakdown(*np.nan_to_num(t, posinf=1.0, neginf=0.0).clip(0, 1)) for t, _ in items]
    rows = [{"pinned": int(s), "protected": 0, "permanent": 0, "critical": 0} for _, s in items]
    found = rl.factors(blend, breakdowns, rows, BALANCED)
    assert np.all((found >= 1 / rl.MAX_FACTOR - 1e-12) & (found <= rl.MAX_FACTOR + 1e-12))
    assert all(f >= 1.0 for f, (_, shielded) in zip(found, items) if shielded)


def test_no_weights_no_change_and_the_typical_memory_keeps_its_score():
    items = [breakdown(0.2, 1.0), breakdown(0.6, 0.0), breakdown(0.4, 0.5)]
    rows = [{}] * 3
    assert rl.factors(rl.RecallBlend(), items, rows, BALANCED) == pytest.approx([1, 1, 1])
    learnt = rl.factors(rl.RecallBlend(weights=(0.5, -0.5, 0, 0, 0)), items, rows, BALANCED)
    assert learnt[0] < 1 < learnt[1] and learnt[2] == pytest.approx(1.0, abs=0.02)


def test_a_reply_keeps_the_terms_of_its_memories_bounded_and_a_reanswer_adds_its_own(db):
    hits = [Hit("memory", i, breakdown(i / 40, 1 - i / 40)) for i in range(1, 41)] + [Hit("episode", 99, {})]
    taken = rl.snapshot(hits, range(1, 41), Settings())
    assert len(taken["features"]) == rl.MAX_STORED
    assert taken["reference"] == pytest.approx([0.5125, 0.4875, 0, 0, 0], abs=1e-3)
    assert rl.snapshot([Hit("episode", 1, {})], [1], Settings()) is None
    episode = add_episode(db, "hi", "hello", metadata={"learning": "pending"})
    rl.remember_reply(db, episode, rl.snapshot(hits[:3], [1, 2, 3], Settings()))
    rl.remember_reply(db, episode, rl.snapshot(hits[3:5], [4, 5], Settings()))
    stored = json.loads(db.scalar("SELECT metadata FROM episodes WHERE id = ?", (episode,)))
    assert set(stored["recall"]["features"]) == {"1", "2", "3", "4", "5"} and stored["learning"] == "pending"
    rl.remember_reply(db, episode, None)  # recall brought no memory: nothing changes
    assert json.loads(db.scalar("SELECT metadata FROM episodes WHERE id = ?", (episode,))) == stored


def test_a_damaged_snapshot_or_record_teaches_nothing_and_breaks_nothing(db):
    from core.store.memories import add_memory
    memory = add_memory(db, "The user likes tea.")
    episode = add_episode(db, "hi", "hello", metadata={"recall": {"features": {str(memory): ["x"] * 5},
                                                                  "reference": [0] * 5}})
    assert not rl.learn_veto(db, Settings(), episode, memory)
    edited = add_episode(db, "hi", "hello", metadata={"recall": {"features": {"x1": [0] * 5, str(memory): [0.5] * 5},
                                                                 "reference": "not terms"}})
    odd = add_episode(db, "hi", "hello", metadata={"recall": {"features": {"x1": [0] * 5, str(memory): [0.5] * 5},
                                                              "reference": [0.1] * 5}})
    assert rl.learn_rating(db, Settings(), edited, 1) == 0
    assert rl.learn_rating(db, Settings(), odd, 1) == 1  # the hand-made key is left out, the memory learnt
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (rl.META_KEY, '{"weights": [1, 2]}'))
    assert rl.load(db) == rl.RecallBlend()
    db.execute("UPDATE meta SET value = ? WHERE key = ?", ("not json", rl.META_KEY))
    assert rl.load(db) == rl.RecallBlend() and rl.effective(db, Settings()) is None


def test_describe_says_what_was_learnt_and_from_how_many_signals_and_reset_forgets_it(db):
    assert rl.describe(db, Settings()).startswith("Nothing learnt yet")
    rl.save(db, rl.RecallBlend(weights=(0.2, -0.5, 0, 0, 0), vetoes=3, pins=1, rated_up=2))
    text = rl.describe(db, Settings())
    assert text.startswith("Learnt from 3 memories removed, 1 pin, 2 thumbs up:")
    assert "meaning ×1.22" in text and "shared words ×0.61" in text and "links ×1.00" in text
    rl.reset(db)
    assert rl.load(db).weights == (0.0,) * 5 and rl.effective(db, Settings()) is None
