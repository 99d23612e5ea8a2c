"""Importance: KenLM's base score, PageRank share, slow decay, permanence at the threshold, edge decay."""
from __future__ import annotations

import numpy as np
import pytest

from core.config import HebbianSettings, Settings
from core.memory import importance
from core.store import edges, history, hypotheses
from core.store.episodes import add_episode
from core.store.memories import add_memory, get_memory, invalidate_memory

SETTINGS = Settings()


def test_summary_links_do_not_count_for_pagerank(db):
    fact, summary = add_memory(db, "The user's bike was stolen."), add_memory(db, "Summary.", kind="summary")
    edges.set_edge(db, fact, summary, "summary", 0.5)
    importance.update_importance(db, SETTINGS)
    assert get_memory(db, fact).importance == 0


def test_base_importance_grows_with_use_protection_evidence_and_freshness():
    one = np.array([1.0])
    zero = np.array([0.0])
    plain = importance.base_importance(zero, zero, zero, np.array([365.0]), SETTINGS)
    for bigger in (importance.base_importance(np.array([10.0]), zero, zero, np.array([365.0]), SETTINGS),
                   importance.base_importance(zero, one, zero, np.array([365.0]), SETTINGS),
                   importance.base_importance(zero, zero, one, np.array([365.0]), SETTINGS),
                   importance.base_importance(zero, zero, zero, zero, SETTINGS)):
        assert bigger[0] > plain[0]


def test_pagerank_feeds_importance_and_decay_is_gradual(db, clock):
    hub, a, b, c, loner = (add_memory(db, f"memory {n}") for n in "HABCL")
    for other in (a, b, c):
        edges.set_edge(db, hub, other, "similarity", 0.9)
    report = importance.update_importance(db, SETTINGS)
    values = {m: get_memory(db, m).importance for m in (hub, a, loner)}
    assert report.memories == 5 and report.updated == 4
    assert values[hub] > values[a] > values[loner] == 0  # freshness is added when retention is scored
    clock.advance(days=10)
    importance.update_importance(db, SETTINGS)
    assert get_memory(db, hub).importance == pytest.approx(values[hub])  # still the hub: it keeps its share


def test_importance_that_is_no_longer_earned_fades_gradually(db, clock):
    episode = add_episode(db, "I always run before work")
    memory = add_memory(db, "The user runs before work.", source_episode_ids=[episode])
    hypothesis = hypotheses.add_hypothesis(db, "routine", "Exercises in the morning", 0.3, [episode])
    importance.update_importance(db, SETTINGS)
    earned = get_memory(db, memory).importance
    hypotheses.decide(db, hypothesis, "rejected")
    clock.advance(days=10)
    importance.update_importance(db, SETTINGS)
    later = get_memory(db, memory).importance
    assert later == pytest.approx(earned * (1 - SETTINGS.hebbian.importance_decay_per_day) ** 10, rel=1e-6)


def test_evidence_for_a_live_hypothesis_counts(db):
    episode = add_episode(db, "I always run before work")
    evidence = add_memory(db, "The user runs before work.", source_episode_ids=[episode])
    other = add_memory(db, "The user owns a red car.")
    hypothesis = hypotheses.add_hypothesis(db, "routine", "Exercises in the morning", 0.3, [episode])
    importance.update_importance(db, SETTINGS)
    assert get_memory(db, evidence).importance > get_memory(db, other).importance
    hypotheses.decide(db, hypothesis, "rejected")
    assert importance.memory_evidence(db) == {}


def test_a_memory_used_often_becomes_permanent_with_a_history_row(db):
    busy = add_memory(db, "The user's daughter is called Mia.")
    quiet = add_memory(db, "The user visited Rome once.")
    db.execute("UPDATE memories SET access_count = 40 WHERE id = ?", (busy,))
    report = importance.update_importance(db, SETTINGS)
    assert report.made_permanent == (busy,)
    assert get_memory(db, busy).permanent and not get_memory(db, quiet).permanent
    entry = history.history(db, busy)[-1]
    assert entry.action == "permanent" and "permanence threshold" in entry.reason
    assert importance.update_importance(db, SETTINGS).made_permanent == ()


def test_the_pass_fades_hebbian_edges_and_skips_closed_memories(db, clock):
    a, b, closed = (add_memory(db, f"fact {n}") for n in "abc")
    edges.strengthen(db, [(a, b)], 0.02)
    importance.update_importance(db, SETTINGS)
    clock.advance(days=30)
    settings = SETTINGS.replace(hebbian=HebbianSettings(decay_per_day=0.2))
    invalidate_memory(db, closed)
    report = importance.update_importance(db, settings)
    assert report.edges_dropped == 1 and edges.get_edge(db, a, b, "hebbian") is None
    assert report.memories == 2


def test_pagerank_matches_networkx_and_needs_no_scipy(monkeypatch):
    """networkx's pagerank imports scipy, which only the optional sentence-transformers extra brought in."""
    import random
    import sys

    import networkx as nx

    from core.memory.importance import pagerank
    rng = random.Random(5)
    graph = nx.Graph()
    for _ in range(300):
        a, b = rng.randrange(120), rng.randrange(120)
        graph.add_edge(a, b, weight=rng.uniform(0.1, 3.0))
    graph.add_edge(500, 500, weight=1.0)  # a self-loop, as networkx allows
    expected = nx.pagerank(graph, weight="weight")
    monkeypatch.setitem(sys.modules, "scipy", None)  # import scipy now fails
    ours = pagerank(graph)
    assert ours.keys() == expected.keys()
    assert max(abs(ours[n] - expected[n]) for n in ours) < 1e-5
