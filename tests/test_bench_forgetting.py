"""bench/forgetting.py runs end to end on a short simulation (the real store, the app's turn, forgetting pass and
MiniLM), so it cannot rot between the runs that produce docs/BENCHMARKS.md."""
from __future__ import annotations

from bench import forgetting
from core.memory import learned
from core.store.db import open_db


def test_the_simulated_user_is_the_same_in_both_arms_and_every_run():
    first, second = forgetting.make_plan(30, seed=3), forgetting.make_plan(30, seed=3)
    assert first.said == second.said and first.asks == second.asks
    assert forgetting.make_plan(30, seed=4).said != first.said
    keys = [item.key for day in first.said for item in day]
    assert len(keys) == len(set(keys))  # every text is said once
    assert not any(item.topic == "errands" for day in first.asks for item in day)  # never asked back
    assert all(item.day <= n - 5 for n, day in enumerate(first.asks) for item in day)


def test_the_forgetting_bench_on_a_short_simulation(embedder):
    result = forgetting.run(days=16, seeds=[7], embedder=embedder, log=lambda *_: None)
    assert result["seeds"] == [7] and list(result["per_seed"]) == ["7"]
    fixed, learnt = result["per_seed"]["7"]["arms"]["fixed"], result["per_seed"]["7"]["arms"]["learned"]
    for name, arm in (("fixed", fixed), ("learned", learnt)):  # one seed: the aggregate is that seed
        whole = result["arms"][name]
        assert (whole["wrongful_forgets"], whole["found"], whole["store_size_end"]) == \
            (arm["wrongful_forgets"], arm["found"], arm["store_size_end"])
    assert result["bench"] == "forgetting" and isinstance(result["passed"], bool)
    for arm in (fixed, learnt):
        assert arm["asked"] > 0 and 0 <= arm["recall_of_asked"] <= 1
        assert arm["uses"] > arm["found"]  # every turn's context is touched, not only what was asked for
        assert 0 < arm["said_items_used"] <= 1
        assert arm["wrongful_forgets"] == arm["forgets_by_topic"]["family"]
        assert arm["restores_by_topic"]["errands"] == 0  # the hidden preference
        assert arm["store_size_end"] > 0 and arm["weights_within_bounds"]
    assert fixed["weights"] == {n: getattr(learned.defaults(forgetting.Settings()), n) for n in learned.NAMES}
    assert fixed["signals"] == {"restores": 0, "silences": 0}


def test_every_chat_turn_and_question_is_the_apps_turn(embedder, tmp_path):
    plan = forgetting.make_plan(12, seed=7)
    settings = forgetting.Settings()
    arm = forgetting.simulate(plan, settings, forgetting.CachedEmbedder(embedder), 7, tmp_path, "fixed")
    db = open_db(tmp_path / "fixed.db")
    try:
        stored = db.query("SELECT user_text, assistant_text, session_id FROM episodes ORDER BY id")
        said = [i.text for day in plan.said for i in day if i.kind == "episode"]
        asked = [i.question for day in plan.asks for i in day]
        assert len(stored) == len(said) + len(asked) == 4 * 12 + 2 * 2  # asks from day 10
        assert {r["user_text"] for r in stored} == set(said) | set(asked)
        answers = [r["assistant_text"] for r in stored if r["user_text"] in asked]
        assert all(a == forgetting.NO_ANSWER or a.startswith(forgetting.ASK_REPLY) for a in answers)
        assert len({r["session_id"] for r in stored}) == 12  # one conversation a day
        used = db.scalar("SELECT count(*) FROM reply_memories")
        touched = db.scalar("SELECT sum(access_count) FROM memories") + db.scalar(
            "SELECT sum(access_count) FROM episodes")
        # finish's access counts (undo's too): only what the answers drew on, far fewer than the context held
        assert touched >= arm["uses"] > 0 and arm["in_context"] > used > arm["uses"]
    finally:
        db.close()


def _arm(wrongful: int, asked: int, found: int, end: int, mean: float) -> dict:
    topics = {t: 0 for t in forgetting.TOPIC_SHARE}
    return {"wrongful_forgets": wrongful, "forgets_by_topic": {**topics, "family": wrongful},
            "restores_by_topic": topics, "asked": asked, "found": found, "uses": 3 * asked, "store_size_end": end,
            "store_size_mean": mean, "weights_within_bounds": True, "seconds": 1.0}


def test_the_arms_over_seeds_sum_forgets_and_asks_and_average_sizes():
    whole = forgetting.aggregate([_arm(10, 100, 90, 500, 250.0), _arm(20, 50, 40, 400, 200.0)], days=90)
    assert whole["wrongful_forgets"] == 30 and whole["wrongful_forgets_per_month"] == 5.0  # 30 over 6 months
    assert whole["recall_of_asked"] == round(130 / 150, 4)  # pooled, not a mean of the seeds' ratios
    assert whole["store_size_end"] == 450.0 and whole["store_size_mean"] == 225.0


def test_no_ratio_and_no_pass_when_the_fixed_arm_forgets_no_family_item():
    judged = forgetting._judged({"arms": {"fixed": _arm(0, 100, 90, 500, 250.0),
                                          "learned": _arm(0, 100, 90, 400, 200.0)}})
    assert judged["wrongful_forgets_ratio"] is None and judged["passed"] is False
    judged = forgetting._judged({"arms": {"fixed": _arm(10, 100, 90, 500, 250.0),
                                          "learned": _arm(5, 100, 90, 500, 250.0)}})
    assert judged["wrongful_forgets_ratio"] == 0.5 and judged["passed"] is True


def test_seeds_on_the_command_line():
    assert forgetting._seeds("3, 7,11") == [3, 7, 11]
    for bad in ("3,x", ","):
        try:
            forgetting._seeds(bad)
        except forgetting.argparse.ArgumentTypeError as error:
            assert "seed" in str(error)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_the_cached_embedder_gives_the_real_rows_once_per_text(embedder):
    cached = forgetting.CachedEmbedder(embedder)
    rows = cached.embed(["My sister Ana moved.", "The bike tyre.", "My sister Ana moved."])
    assert (rows[0] == rows[2]).all() and len(cached.rows) == 2
    assert abs(float(rows[1] @ embedder.embed(["The bike tyre."])[0]) - 1.0) < 1e-5
