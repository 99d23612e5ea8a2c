"""What the Forgetting timeline draws (app.ui.timeline_state, no Qt): each curve is the one the forgetting pass
applies to that item — the weights learnt from this user and the item's preference (what the user's restores and
silences say about items like it) — not the default weights."""
from __future__ import annotations

import numpy as np
import pytest

from app.ui.timeline_state import read_timeline
from core.config import Settings
from core.memory import forget, learned
from core.memory.index import index_memories
from core.store.memories import add_memory

SETTINGS = Settings()
FORGET_ALL = learned.LearnedRetention(alpha=0.5, beta=0.0, gamma=0.5, bias=-8.0, kept_signals=1)
LEARNT = learned.LearnedRetention(alpha=2.0, beta=1.0, gamma=3.0, bias=-1.5, kept_signals=3, forgot_signals=3,
                                  delta=2.5)
FAMILY = ["The user's sister Ana adopted a grey kitten called Pepper.",
          "The user's brother Tom is learning to play the violin.",
          "The user's mother moved into a new flat near the river.",
          "The user's daughter Mia is starting a pottery class on Thursdays."]
ERRANDS = ["The dry cleaning has to be picked up before Friday.",
           "The electricity bill is overdue by a few days.",
           "The library books must go back this weekend.",
           "The car's oil change needs doing on the way home."]
DAY = 86400.0


def facts(db, embedder, texts):
    ids = [add_memory(db, text, importance=0.05) for text in texts]
    index_memories(db, embedder, ids)
    return ids


@pytest.fixture
def taught(db, clock, embedder):
    """A user who asked back every family fact forgetting took and left the errands forgotten, with weights
    learnt far from the defaults; then one new family fact and one new errand, faded."""
    family, _errands = facts(db, embedder, FAMILY[:3]), facts(db, embedder, ERRANDS[:3])
    clock.advance(days=200)
    learned.save(db, FORGET_ALL)
    forget.forgetting_pass(db, SETTINGS)
    events = {e.item_id: e.id for e in forget.list_events(db)}
    for fact in family:
        forget.undo(db, events[fact])
    clock.advance(days=learned.SILENCE_DAYS + 1)
    new = {"family": facts(db, embedder, FAMILY[3:])[0], "errand": facts(db, embedder, ERRANDS[3:])[0]}
    clock.advance(days=60)
    learned.save(db, LEARNT)
    return new


def test_each_curve_starts_at_the_retention_the_pass_applies(db, taught):
    view = read_timeline(db, SETTINGS, horizon_days=90)
    table = forget.score_store(db, SETTINGS)["memory"]
    applied = dict(zip(table.ids.tolist(), table.retention.tolist()))
    liked = dict(zip(table.ids.tolist(), table.preferences().tolist()))
    assert liked[taught["family"]] > 0 > liked[taught["errand"]]  # the content term is really in play
    drawn = {c.item_id: c for c in view.curves if c.item_type == "memory"}
    assert {taught["family"], taught["errand"]} <= set(drawn)
    for item_id, curve in drawn.items():
        assert curve.values[0] == pytest.approx(applied[item_id], abs=1e-9)  # today, as the pass scores it
        assert curve.values[0] == pytest.approx(curve.retention, abs=1e-9)


def test_the_day_shown_is_where_the_drawn_curve_crosses_the_threshold(db, taught):
    view = read_timeline(db, SETTINGS, horizon_days=90)
    for curve in view.curves:
        values = np.array(curve.values)
        below = [day for day, p in zip(view.days, values) if p < view.threshold]
        if curve.days_left is None:
            assert not below
        else:
            assert below and curve.days_left <= below[0]  # the days drawn are a sample of the whole days counted
            assert all(p >= view.threshold for day, p in zip(view.days, values) if day < curve.days_left)

