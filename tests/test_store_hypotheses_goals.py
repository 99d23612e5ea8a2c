"""Hypotheses and learning goals in the store: confidence bounds, evidence, decisions, reuse of open goals."""
from __future__ import annotations

import pytest

from core.errors import InvalidInput, NotFound
from core.store import goals, hypotheses
from core.store.episodes import add_episode


def test_hypothesis_keeps_its_evidence_once(db):
    e1, e2 = add_episode(db, "I prefer short answers"), add_episode(db, "keep it brief please")
    hid = hypotheses.add_hypothesis(db, "communication_style", "Prefers short answers", 0.3, [e1])
    assert hypotheses.add_evidence(db, hid, [e1, e2]) == [e2]
    h = hypotheses.get_hypothesis(db, hid)
    assert h.status == "open" and h.confidence == 0.3 and h.evidence_episode_ids == (e1, e2)
    assert hypotheses.evidence_counts(db, [e1, e2, 999]) == {e1: 1, e2: 1}


def test_hypothesis_decisions_and_edits(db, clock):
    hid = hypotheses.add_hypothesis(db, "interests", "Likes hiking", 0.4)
    clock.advance(days=1)
    h = hypotheses.decide(db, hid, "confirmed")
    assert h.status == "confirmed" and h.decided_at == clock.now
    h = hypotheses.edit_hypothesis(db, hid, claim="Likes hiking in the Alps")
    assert h.claim == "Likes hiking in the Alps" and h.status == "confirmed"
    assert [x.id for x in hypotheses.list_hypotheses(db, status="confirmed")] == [hid]
    assert hypotheses.list_hypotheses(db, status="rejected") == []
    assert hypotheses.decide(db, hid, "open").decided_at is None


def test_bad_hypothesis_input_changes_nothing(db):
    with pytest.raises(InvalidInput):
        hypotheses.add_hypothesis(db, "style", "x", 1.5)
    with pytest.raises(InvalidInput):
        hypotheses.add_hypothesis(db, "", "claim", 0.3)
    hid = hypotheses.add_hypothesis(db, "style", "claim", 0.3)
    with pytest.raises(InvalidInput):
        hypotheses.decide(db, hid, "maybe")
    with pytest.raises(InvalidInput):
        hypotheses.edit_hypothesis(db, hid, claim="   ")
    with pytest.raises(NotFound):
        hypotheses.decide(db, 999, "confirmed")
    with pytest.raises(InvalidInput):
        hypotheses.list_hypotheses(db, status="maybe")
    assert [h.claim for h in hypotheses.list_hypotheses(db)] == ["claim"]


def test_open_goal_is_reused_and_closed_once(db):
    gid = goals.open_goal(db, "Do you still live in Boston?", reason="conflict", memory_ids=[3, 1, 3])
    assert goals.open_goal(db, "do you still live in boston?") == gid
    goal = goals.get_goal(db, gid)
    assert goal.memory_ids == (1, 3) and goal.status == "open" and goal.reason == "conflict"
    goals.touch_goal(db, gid)
    assert goals.get_goal(db, gid).last_considered is not None
    closed = goals.close_goal(db, gid, "No, Denver now")
    assert closed.status == "closed" and closed.answer == "No, Denver now"
    with pytest.raises(InvalidInput):
        goals.close_goal(db, gid)
    assert goals.list_goals(db) == [] and [g.id for g in goals.list_goals(db, status="closed")] == [gid]
    assert goals.open_goal(db, "Do you still live in Boston?") != gid  # a closed question may be asked again


def test_bad_goal_input(db):
    with pytest.raises(InvalidInput):
        goals.open_goal(db, "  ")
    with pytest.raises(NotFound):
        goals.close_goal(db, 42)
    with pytest.raises(InvalidInput):
        goals.list_goals(db, status="done")
    assert goals.list_goals(db, status=None) == []
