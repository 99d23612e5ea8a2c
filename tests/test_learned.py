"""Retention weights learnt from the user's restores and silences (core.memory.learned) and their wiring in
core.memory.forget: bounds, defaults until a signal, the direction of each signal, the size penalty, reset, a
damaged record, learning switched off, and the memories no weights can make forgettable."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings as hyp_settings, strategies as st

from core.config import ForgettingSettings, Settings
from core.memory import forget, learned
from core.store.episodes import add_episode, get_episode, set_episode_protected
from core.store.memories import add_memory, get_memory, set_flag

SETTINGS = Settings()
OFF = SETTINGS.replace(forgetting=ForgettingSettings(learn=False))
FORGET_ALL = learned.LearnedRetention(alpha=0.5, beta=0.0, gamma=0.5, bias=-8.0, kept_signals=1)
KEEP_ALL = learned.LearnedRetention(alpha=8.0, beta=8.0, gamma=10.0, bias=0.0, kept_signals=1)


def within_bounds(weights: learned.LearnedRetention) -> bool:
    return all(low <= getattr(weights, name) <= high for name, (low, high) in learned.BOUNDS.items())


def retention(weights: learned.LearnedRetention, terms) -> float:
    """P for (recency, relevance, importance[, preference]): the order of learned.NAMES, the bias's input 1."""
    terms = list(terms)
    x = np.array([*terms[:3], 1.0, *(terms[3:] or [0.0])])
    return float(1.0 / (1.0 + np.exp(-(weights.vector() @ x))))


def stored(db):
    return db.scalar("SELECT value FROM meta WHERE key = ?", (learned.META_KEY,))


def faded_facts(db, clock, n: int = 3) -> list[int]:
    """Facts nobody used for 200 days: below the threshold with the default weights."""
    ids = [add_memory(db, f"The user once mentioned fact number {i}.") for i in range(n)]
    clock.advance(days=200)
    return ids


def events_by_item(db) -> dict[int, forget.ForgettingEvent]:
    return {e.item_id: e for e in forget.list_events(db) if e.item_type == "memory"}


# -- the learner alone ---------------------------------------------------------------------------------------
TERM = st.floats(allow_nan=True, allow_infinity=True, width=64)
SIGNAL = st.tuples(st.one_of(st.tuples(TERM, TERM, TERM), st.tuples(TERM, TERM, TERM, TERM)), st.booleans())
STRENGTH = st.sampled_from(["gentle", "normal", "strong"])


@hyp_settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(signals=st.lists(SIGNAL, max_size=60), threshold=st.floats(0.0, 1.0), strength=STRENGTH,
       store=st.lists(st.tuples(TERM, TERM, TERM), max_size=20))
def test_weights_stay_within_bounds_whatever_the_signals(signals, threshold, strength, store):
    settings = Settings().replace(forgetting=ForgettingSettings(threshold=threshold, strength=strength))
    weights = learned.defaults(settings)
    for terms, kept in signals:
        weights = learned.step(weights, terms, kept, settings)
        assert within_bounds(weights)
        weights = learned.size_step(weights, np.array(store, dtype=np.float64).reshape(-1, 3), settings)
        assert within_bounds(weights)
    assert weights.kept_signals == sum(k for _, k in signals)
    assert weights.forgot_signals == sum(not k for _, k in signals)


def test_a_long_run_of_one_sided_signals_ends_at_the_bounds_not_beyond():
    keep, drop = learned.defaults(SETTINGS), learned.defaults(SETTINGS)
    for _ in range(5000):
        keep = learned.step(keep, (0.0, 1.0, 1.0), True, SETTINGS)
        drop = learned.step(drop, (1.0, 1.0, 1.0), False, SETTINGS)
    assert within_bounds(keep) and within_bounds(drop)
    assert keep.beta > SETTINGS.forgetting.beta and drop.alpha < SETTINGS.forgetting.alpha


def test_a_restore_moves_the_boundary_towards_keeping_items_like_it():
    terms = (0.05, 0.6, 0.1)  # faded, but about what the user talks about lately
    before = learned.defaults(SETTINGS)
    after = learned.step(before, terms, True, SETTINGS)
    assert retention(after, terms) > retention(before, terms)
    assert after.beta > before.beta and after.bias > before.bias  # the terms the item had are the ones rewarded
    assert (after.kept_signals, after.forgot_signals) == (1, 0)
    silenced = learned.step(after, terms, False, SETTINGS)
    assert retention(silenced, terms) < retention(after, terms)
    assert (silenced.kept_signals, silenced.forgot_signals) == (1, 1)


def test_a_burst_of_restores_moves_each_weight_a_bounded_amount():
    """AdaGrad: one signal moves a weight by at most η, n agreeing signals by about η·√n (a shared step let a
    week's restores swing the bias by several units)."""
    weights = learned.defaults(SETTINGS)
    for _ in range(30):
        weights = learned.step(weights, (0.4, 0.05, 0.1), True, SETTINGS)
    shift = weights.vector() - learned.defaults(SETTINGS).vector()
    assert np.all(np.abs(shift) <= 2 * learned.LEARNING_RATE * np.sqrt(30))  # Σ 1/√k ≤ 2√n
    assert np.all(shift[[0, 1, 3]] > 0)


def test_the_size_step_leans_towards_forgetting_a_bounded_amount_and_only_after_a_signal():
    store = np.random.default_rng(0).uniform(0, 1, size=(500, 3))
    start = learned.defaults(SETTINGS)
    assert learned.size_step(start, store, SETTINGS) == start  # no signal yet: exactly the defaults
    engaged = replace(start, kept_signals=1)
    weights = engaged
    for _ in range(2000):
        weights = learned.size_step(weights, store, SETTINGS)
    mean_p = lambda w: float(np.mean([retention(w, row) for row in store]))  # noqa: E731
    assert mean_p(weights) < mean_p(engaged)
    shift = weights.vector() - engaged.vector()
    limit = learned.SIZE_PENALTY / (4 * learned.PULL_TO_DEFAULTS)
    assert np.all(shift <= 1e-12) and np.all(shift >= -limit - 1e-9)
    assert learned.size_step(engaged, np.empty((0, 3)), SETTINGS) == engaged


# -- stored, reset, damaged ----------------------------------------------------------------------------------
def test_no_signal_means_exactly_the_defaults(db, clock):
    assert learned.load(db, SETTINGS) == learned.defaults(SETTINGS)
    assert learned.effective(db, SETTINGS) == SETTINGS
    faded_facts(db, clock)
    forget.forgetting_pass(db, SETTINGS)
    clock.advance(days=30)
    forget.forgetting_pass(db, SETTINGS)
    assert learned.load(db, SETTINGS) == learned.defaults(SETTINGS)
    assert learned.effective(db, SETTINGS) == SETTINGS


def test_reset_returns_to_the_defaults(db):
    learned.save(db, KEEP_ALL)
    assert learned.load(db, SETTINGS) == KEEP_ALL
    learned.reset(db)
    assert stored(db) is None and learned.load(db, SETTINGS) == learned.defaults(SETTINGS)


@pytest.mark.parametrize("raw", ["not json", "[]", "null", '"text"', "3", "{}", '{"alpha": "x"}',
                                 '{"alpha": "x", "beta": 1, "gamma": 1, "bias": -1}',
                                 '{"alpha": NaN, "beta": 1, "gamma": 1, "bias": -1}',
                                 '{"alpha": 1, "beta": 1, "gamma": 1, "bias": -1, "kept_signals": "many"}',
                                 '{"alpha": 1, "beta": 1, "gamma": 1, "bias": -1, "kept_signals": -4}',
                                 '{"alpha": 1, "beta": 1, "gamma": 1, "bias": -1, "forgot_signals": 1.5}',
                                 '{"alpha": 1, "beta": 1, "gamma": 1, "bias": -1, "squared": [1, 2]}',
                                 '{"alpha": 1, "beta": 1, "gamma": 1, "bias": -1, "squared": [1, 2, -3, 4]}'])
def test_a_damaged_record_starts_over(db, clock, raw):
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (learned.META_KEY, raw))
    assert learned.load(db, SETTINGS) == learned.defaults(SETTINGS)
    ids = faded_facts(db, clock, 1)
    forget.forgetting_pass(db, SETTINGS)  # forgetting still works
    assert get_memory(db, ids[0]).forgotten_at is not None


def test_a_record_out_of_bounds_is_clipped_into_them(db):
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (learned.META_KEY, json.dumps(
        {"alpha": 1e9, "beta": -5, "gamma": 3.0, "bias": 7, "kept_signals": 2, "forgot_signals": 1})))
    weights = learned.load(db, SETTINGS)
    assert within_bounds(weights) and (weights.alpha, weights.beta, weights.bias) == (8.0, 0.0, 0.0)
    assert weights.signals == 3


# -- wiring in forget ----------------------------------------------------------------------------------------
def test_an_undo_teaches_keep_things_like_this_at_the_next_pass(db, clock):
    fact = faded_facts(db, clock, 1)[0]
    forget.forgetting_pass(db, SETTINGS)
    event = events_by_item(db)[fact]
    terms = db.query_one("SELECT recency, relevance, importance FROM forgetting_events WHERE id = ?", (event.id,))
    before = learned.load(db, SETTINGS)
    forget.undo(db, event.id)
    assert get_memory(db, fact).access_count == 1  # a restore is a use
    assert learned.load(db, SETTINGS) == before  # learnt at the next pass, with that pass's relevance
    forget.forgetting_pass(db, SETTINGS)
    after = learned.load(db, SETTINGS)
    assert after.kept_signals == 1 and after.forgot_signals == 0
    terms = (terms["recency"], terms["relevance"], terms["importance"])
    assert retention(after, terms) > retention(before, terms)
    forget.forgetting_pass(db, SETTINGS)
    assert learned.load(db, SETTINGS).kept_signals == 1  # each restore counts once


def test_silence_before_any_restore_teaches_nothing_and_after_one_it_does(db, clock):
    first = faded_facts(db, clock, 3)
    forget.forgetting_pass(db, SETTINGS)
    clock.advance(days=learned.SILENCE_DAYS + 1)
    forget.forgetting_pass(db, SETTINGS)  # the user never looked: silence says nothing
    assert learned.load(db, SETTINGS) == learned.defaults(SETTINGS)

    forget.undo(db, events_by_item(db)[first[0]].id)
    faded_facts(db, clock, 3)
    second = forget.forgetting_pass(db, SETTINGS).events  # the new facts, and the restored one faded again
    restored = learned.load(db, SETTINGS)
    assert (restored.kept_signals, restored.forgot_signals) == (1, 0)  # the old silences stay uncounted
    clock.advance(days=learned.SILENCE_DAYS + 1)
    forget.forgetting_pass(db, SETTINGS)
    weights = learned.load(db, SETTINGS)
    assert weights.kept_signals == 1 and weights.forgot_signals == len(second) >= 3
    assert weights.bias < restored.bias  # forgettings left alone lean towards forgetting
    clock.advance(days=learned.SILENCE_DAYS + 1)
    forget.forgetting_pass(db, SETTINGS)
    assert learned.load(db, SETTINGS).forgot_signals == len(second)  # each silence counts once


def test_a_restore_after_the_silence_window_still_teaches(db, clock):
    """The user asks for something back a month after it was forgotten: the restore is the strongest signal
    there is, whether or not the silence was already counted."""
    fact = faded_facts(db, clock, 1)[0]
    forget.forgetting_pass(db, SETTINGS)
    clock.advance(days=30)
    forget.forgetting_pass(db, SETTINGS)
    forget.undo(db, events_by_item(db)[fact].id)
    forget.forgetting_pass(db, SETTINGS)
    assert learned.load(db, SETTINGS).kept_signals == 1


def test_learning_off_changes_nothing(db, clock):
    facts = faded_facts(db, clock, 3)
    forget.forgetting_pass(db, OFF)
    forget.undo(db, events_by_item(db)[facts[0]].id)
    clock.advance(days=learned.SILENCE_DAYS + 1)
    forget.forgetting_pass(db, OFF)
    assert stored(db) is None
    learned.save(db, KEEP_ALL)  # weights learnt earlier are not used while learning is off
    assert learned.effective(db, OFF) == OFF
    table = forget.score_store(db, OFF)["memory"]
    expected = forget.retention_probability(table.recency, table.relevance, table.importance, OFF)
    assert np.allclose(table.retention, expected)
    assert learned.load(db, SETTINGS) == KEEP_ALL


def test_learned_weights_are_the_ones_forgetting_uses(db, clock):
    facts = faded_facts(db, clock, 2)
    learned.save(db, KEEP_ALL)
    assert forget.forgetting_pass(db, SETTINGS).archived == ()
    learned.save(db, FORGET_ALL)
    assert set(forget.forgetting_pass(db, SETTINGS).archived) == set(facts)


def test_nothing_untouchable_is_forgotten_whatever_the_weights(db, clock):
    untouchable = {}
    for flag in ("pinned", "protected", "permanent"):
        untouchable[flag] = add_memory(db, f"A {flag} memory the user set apart.")
        set_flag(db, untouchable[flag], flag, True)
    untouchable["critical"] = add_memory(db, "The user is allergic to penicillin.", critical=True)
    kept_turn = add_episode(db, "Remember this conversation forever.")
    set_episode_protected(db, kept_turn, True)
    plain = add_memory(db, "The user once bought a kettle.")
    clock.advance(days=400)
    learned.save(db, FORGET_ALL)
    for weights in (FORGET_ALL, learned.LearnedRetention(0.5, 0.0, 0.5, -8.0, 0, 50)):
        learned.save(db, weights)
        result = forget.forgetting_pass(db, SETTINGS.replace(forgetting=ForgettingSettings(strength="strong")))
        for name, memory_id in untouchable.items():
            assert get_memory(db, memory_id).forgotten_at is None, name
        assert get_episode(db, kept_turn).forgotten_at is None
    assert plain in result.archived or get_memory(db, plain).forgotten_at is not None


# -- what the user sees: engram forget --weights / --reset-weights -------------------------------------------
def test_the_command_line_shows_and_resets_the_learnt_weights(tmp_path, capsys):
    from app.cli.main import run_cli
    from core.store.db import open_db
    home = str(tmp_path / "home")
    assert run_cli(["--data-dir", home, "forget", "--weights"]) == 0
    assert capsys.readouterr().out.startswith("Nothing learnt yet")
    db = open_db(tmp_path / "home" / "engram.db")
    learned.save(db, learned.LearnedRetention(3.5, 2.0, 4.0, -2.5, kept_signals=1, forgot_signals=2))
    db.close()
    assert run_cli(["--data-dir", home, "forget", "--weights"]) == 0
    out = capsys.readouterr().out
    assert "Learnt from 1 restore, 2 forgettings left alone and 0 memories and turns your replies used" in out
    assert "recency 3.50 (default 3.00)" in out
    assert run_cli(["--data-dir", home, "forget", "--weights", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["alpha"], shown["signals"], shown["defaults"]["alpha"]) == (3.5, 3, 3.0)
    assert run_cli(["--data-dir", home, "forget", "--reset-weights"]) == 0
    assert "3 signals set aside" in capsys.readouterr().out
    assert run_cli(["--data-dir", home, "forget", "--weights"]) == 0
    assert capsys.readouterr().out.startswith("Nothing learnt yet")


def test_an_undo_from_the_command_line_follows_the_users_learning_setting(tmp_path, clock, capsys):
    from app.cli.main import run_cli
    from core.config import load_settings, save_settings
    from core.store.db import open_db
    home = tmp_path / "home"
    assert run_cli(["--data-dir", str(home), "forget", "--weights"]) == 0
    save_settings(load_settings(home).replace(forgetting=ForgettingSettings(learn=False)), home)
    db = open_db(home / "engram.db", clock=clock)
    fact = faded_facts(db, clock, 1)[0]
    forget.forgetting_pass(db, OFF)
    event = events_by_item(db)[fact].id
    db.close()
    assert run_cli(["--data-dir", str(home), "forget", "--undo", str(event)]) == 0
    assert "Learning is off" in (run_cli(["--data-dir", str(home), "forget", "--weights"]) == 0 and
                                 capsys.readouterr().out)
    db = open_db(home / "engram.db")
    assert stored(db) is None
    db.close()


# -- relevance: what the user asked back counts as what they care about (core.memory.relevance) --------------
def test_items_like_a_restored_one_become_relevant_and_it_is_not_relevant_to_itself(db, clock, embedder):
    from core.memory import relevance as rel
    from core.memory.index import index_episodes
    family = [add_episode(db, text) for text in ("My sister Ana adopted a grey kitten.",
                                                 "My sister Ana is learning to play the violin.",
                                                 "My sister Ana moved into a flat near the river.")]
    errands = [add_episode(db, text) for text in ("The dry cleaning has to be picked up on Friday.",
                                                  "The electricity bill is overdue by a few days.",
                                                  "The library books must go back this weekend.")]
    index_episodes(db, embedder, family + errands)
    clock.advance(days=60)
    learned.save(db, FORGET_ALL)
    forget.forgetting_pass(db, SETTINGS)
    learned.reset(db)
    ids = np.array(family + errands)

    def relevance(leave_out=None):
        ctx = rel.context(db, SETTINGS, db.now())
        cosine = ctx.grouped(rel.cosines(db, "episode", ids, ctx.points(leave_out)))
        return dict(zip(ids.tolist(), rel.relevance(cosine, rel.reference(cosine)))), ctx

    before, _ = relevance()
    forget.undo(db, events_by_item_type(db, "episode")[family[0]].id)
    after, ctx = relevance()
    assert len(ctx.restored) == 1 and len(ctx.points()) == 2
    assert min(after[e] for e in family[1:]) > max(after[x] for x in errands)  # the same person, not errands
    assert all(after[e] > before[e] for e in family[1:])
    assert len(ctx.points(leave_out=("episode", family[0]))) == 1  # the restored item is not near itself


def events_by_item_type(db, kind: str) -> dict[int, forget.ForgettingEvent]:
    return {e.item_id: e for e in forget.list_events(db) if e.item_type == kind}


def test_one_signal_in_a_batch_is_recall_learnings_single_step():
    """One copy of the maths: learned's batch update (core.memory.online_logistic.batch_step) of one row is the
    per-signal step recall's learnt blend takes."""
    from core.memory import online_logistic as ol
    w, anchor, x = np.array([0.5, -1.0, 2.0]), np.array([0.0, -1.0, 1.0]), np.array([0.3, 1.0, 0.9])
    size = ol.StepSize(rate=0.2, epsilon=0.05, pull=0.02)
    one = ol.step(w, np.zeros(3), x, 1.0, anchor=anchor, size=size, weight=0.5, offset=-0.4)
    batch = ol.batch_step(w, np.zeros(3), x[None, :], np.array([1.0]), anchor=anchor, size=size,
                          weight=np.array([0.5]), offset=-0.4)
    assert np.allclose(one[0], batch[0]) and np.allclose(one[1], batch[1])
    twice = ol.batch_step(w, np.zeros(3), np.stack([x, x]), np.array([1.0, 1.0]), anchor=anchor, size=size,
                          weight=0.5, offset=-0.4)
    assert np.allclose(twice[0], batch[0])  # the mean: a burst of the same signal moves no further than one


def test_learned_batch_step_is_the_documented_update():
    settings = Settings()
    start = learned.defaults(settings)
    terms, kept = [(0.2, 0.1, 0.3, 1.5), (0.1, 0.0, 0.2, -2.0)], [True, False]
    x = np.array([[0.2, 0.1, 0.3, 1.0, 1.5], [0.1, 0.0, 0.2, 1.0, -2.0]])
    y, weight = np.array([1.0, 0.0]), np.array([1.0, learned.SILENCE_WEIGHT])
    tau = settings.forgetting.effective_threshold()
    p = 1 / (1 + np.exp(-(x @ start.vector() - np.log(tau / (1 - tau)))))
    g = (weight * (y - p)) @ x / 2
    expected = start.vector() + learned.LEARNING_RATE * g / (np.abs(g) + learned.ADAGRAD_EPSILON)
    after = learned.batch_step(start, terms, kept, settings)
    assert np.allclose(after.vector(), expected) and np.allclose(after.squared, g ** 2)
    assert (after.kept_signals, after.forgot_signals) == (1, 1)


def test_a_pass_that_agrees_with_the_weights_moves_them_far_less_than_one_that_contradicts_them():
    """AdaGrad's ε: a silence about an item already far below the boundary (a tiny gradient) is not a full step."""
    start, far_below = learned.defaults(SETTINGS), (0.0, 0.0, 0.0, -3.0)
    agreeing = learned.batch_step(start, [far_below], [False], SETTINGS)
    contradicting = learned.batch_step(start, [far_below], [True], SETTINGS)
    assert abs(agreeing.bias - start.bias) < 0.05 * abs(contradicting.bias - start.bias)
    assert contradicting.bias > start.bias > agreeing.bias


def test_before_any_restore_the_settings_line_says_the_replies_uses_already_steer(db, clock):
    from core.assistant import Assistant, PreparedTurn, UsedMemory
    from core.store.memories import add_memory
    settings = Settings()
    assert learned.describe(db, settings).startswith("Nothing learnt yet")
    cello = add_memory(db, "The user plays the cello.")
    used = (UsedMemory(cello, "The user plays the cello.", "recalled", 0.5),)
    Assistant(db, None, None, None, settings, clock).finish(
        PreparedTurn(None, "What do I play?", (), used, clock()), "You play the cello.")
    line = learned.describe(db, settings)
    assert line.startswith("No weight learnt yet") and "1 memory or turn your replies used" in line
