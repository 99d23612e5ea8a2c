"""ScoreTable turns its columns into Scored items in one conversion (100k items: `forget --preview` made a zeros
array per item, 5 s): the same items, values and order as reading them one position at a time."""
from __future__ import annotations

import numpy as np
import pytest

from core.memory.retention import Scored, ScoreTable


def table(preference: np.ndarray | None) -> ScoreTable:
    rng = np.random.default_rng(7)
    n = 50
    retention = rng.random(n)
    retention[[3, 9]] = retention[20]  # ties keep their column order
    return ScoreTable("memory", np.arange(100, 100 + n), rng.random(n) * 30, rng.random(n), rng.random(n),
                      rng.random(n), retention, preference=preference)


def one_at_a_time(t: ScoreTable, n: int) -> Scored:
    preference = 0.0 if t.preference is None else float(t.preference[n])
    return Scored(t.item_type, int(t.ids[n]), float(t.recency[n]), float(t.relevance[n]), float(t.importance[n]),
                  float(t.retention[n]), float(t.age_days[n]), preference)


@pytest.mark.parametrize("preference", [None, np.linspace(-1, 1, 50)])
def test_below_is_every_item_under_the_threshold_lowest_first_with_its_own_terms(preference):
    t = table(preference)
    order = np.argsort(t.retention, kind="stable")
    expected = [one_at_a_time(t, int(n)) for n in order if t.retention[n] < 0.4]
    assert t.below(0.4) == expected and expected
    assert all(type(getattr(s, f)) is float for s in t.below(0.4) for f in ("recency", "retention", "preference"))
    assert t.row(9) == one_at_a_time(t, 9)
    assert t.below(0.0) == []


def test_lookup_gives_each_ids_count_and_zero_for_the_others():
    from core.memory.importance import lookup
    counts = {7: 2, 3: 1, 100: 5}
    ids = np.array([1, 3, 7, 8, 100, 101, 3])
    assert lookup(counts, ids).tolist() == [counts.get(int(i), 0) for i in ids]
    assert lookup({}, ids).tolist() == [0.0] * 7 and lookup(counts, []).tolist() == []
