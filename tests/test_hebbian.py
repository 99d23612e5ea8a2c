"""Hebbian learning on the memory graph: use counts, co-activation, reinforcement, veto, decay."""
from __future__ import annotations

import pytest

from core.config import HebbianSettings
from core.memory import hebbian
from core.store import edges
from core.store.memories import add_memory, get_memory


@pytest.fixture
def three(db):
    return [add_memory(db, f"fact number {i}") for i in range(3)]


def test_touch_counts_each_use_once_and_stamps_the_time(db, clock, three):
    assert hebbian.touch(db, [three[0], three[0], three[1]]) == 2
    clock.advance(days=1)
    hebbian.touch(db, [three[0]])
    first = get_memory(db, three[0])
    assert first.access_count == 2 and first.last_access == clock.now
    assert get_memory(db, three[2]).access_count == 0
    assert hebbian.touch(db, []) == 0


def test_reinforce_follows_the_hebbian_rule_for_every_pair(db, three):
    settings = HebbianSettings(learning_rate=0.2)
    assert hebbian.reinforce(db, three, settings) == 3
    assert edges.get_edge(db, three[0], three[2], "hebbian").weight == pytest.approx(0.2)
    hebbian.reinforce(db, three[:2], settings)
    assert edges.get_edge(db, three[1], three[0], "hebbian").weight == pytest.approx(0.2 + 0.2 * 0.8)
    assert edges.get_edge(db, three[1], three[2], "hebbian").weight == pytest.approx(0.2)


def test_coactivation_refreshes_existing_edges_but_creates_none(db, clock, three):
    hebbian.reinforce(db, three[:2], HebbianSettings())
    clock.advance(days=3)
    assert hebbian.coactivate(db, three) == 1
    assert edges.get_edge(db, three[0], three[1], "hebbian").last_coactivated == clock.now
    assert edges.get_edge(db, three[0], three[2], "hebbian") is None


def test_veto_halves_the_vetoed_memorys_edges_to_its_reply_mates_only(db, three):
    hebbian.reinforce(db, three, HebbianSettings(learning_rate=0.4))
    assert hebbian.weaken(db, three[0], three, factor=0.5) == 2
    assert edges.get_edge(db, three[0], three[1], "hebbian").weight == pytest.approx(0.2)
    assert edges.get_edge(db, three[0], three[2], "hebbian").weight == pytest.approx(0.2)
    assert edges.get_edge(db, three[1], three[2], "hebbian").weight == pytest.approx(0.4)


def test_decay_fades_by_elapsed_days_and_drops_faded_edges(db, clock, three):
    settings = HebbianSettings(learning_rate=0.5, decay_per_day=0.1, min_edge_weight=0.3)
    hebbian.reinforce(db, three[:2], settings)
    hebbian.reinforce(db, three[:2], settings)  # 0.75
    hebbian.reinforce(db, three[1:], settings)  # 0.5
    edges.set_edge(db, three[0], three[2], "similarity", 0.9)
    assert hebbian.decay_edges(db, settings) == 0  # the first pass only sets the clock
    clock.advance(days=2)
    assert hebbian.decay_edges(db, settings) == 0  # 0.5·0.81 = 0.405 stays above 0.3
    assert edges.get_edge(db, three[0], three[1], "hebbian").weight == pytest.approx(0.75 * 0.81)
    assert edges.get_edge(db, three[0], three[2], "similarity").weight == pytest.approx(0.9)  # not Hebbian
    clock.advance(days=3)
    assert hebbian.decay_edges(db, settings) == 1  # 0.405·0.729 < 0.3: dropped
    assert edges.get_edge(db, three[1], three[2], "hebbian") is None


def test_decayed_weight_is_exponential_and_never_grows():
    assert hebbian.decayed_weight(1.0, 10, 0.02) == pytest.approx(0.98 ** 10)
    assert hebbian.decayed_weight(0.5, -3, 0.02) == 0.5
