"""bench/forgetting.py runs end to end on a short simulation (the real store, forgetting pass, recall and MiniLM), so
it cannot rot between the runs that produce docs/BENCHMARKS.md."""
from __future__ import annotations

from bench import forgetting
from core.memory import learned


def test_the_simulated_user_is_the_same_in_both_arms_and_every_run():
    first, second = forgetting.make_plan(30, seed=3), forgetting.make_plan(30, seed=3)
    assert first.said == second.said and first.asks == second.asks
    assert forgetting.make_plan(30, seed=4).said != first.said
    keys = [item.key for day in first.said for item in day]
    assert len(keys) == len(set(keys))  # every text is said once
    assert not any(item.topic == "errands" for day in first.asks for item in day)  # never asked back
    assert all(item.day <= n - 5 for n, day in enumerate(first.asks) for item in day)


def test_the_forgetting_bench_on_a_short_simulation(embedder):
    result = forgetting.run(days=45, seed=7, embedder=embedder, log=lambda *_: None)
    fixed, learnt = result["arms"]["fixed"], result["arms"]["learned"]
    assert result["bench"] == "forgetting" and isinstance(result["passed"], bool)
    for arm in (fixed, learnt):
        assert arm["asked"] > 0 and 0 <= arm["recall_at_10_of_asked"] <= 1
        assert arm["wrongful_forgets"] == arm["forgets_by_topic"]["family"]
        assert arm["restores_by_topic"]["errands"] == 0  # the hidden preference
        assert arm["store_size_end"] > 0 and arm["weights_within_bounds"]
    assert sum(fixed["forgets_by_topic"].values()) > 0  # 45 days are enough for turns to fade
    assert fixed["weights"] == {n: getattr(learned.defaults(forgetting.Settings()), n) for n in learned.NAMES}
    assert fixed["signals"] == {"restores": 0, "silences": 0}
