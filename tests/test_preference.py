"""Preference, forgetting's content term (core.memory.preference), and its weight δ (core.memory.learned): the vote
of the labelled items near an item, neutral without both kinds of answer or without close neighbours, never an
item's own label; one learning step a pass; and, through the real store and MiniLM, restored family facts keeping
other family facts while errands left forgotten let other errands go — never a pinned one."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from core.config import ForgettingSettings, Settings
from core.memory import forget, learned
from core.memory import preference as pref
from core.memory.index import index_memories
from core.store.memories import add_memory, get_memory, set_flag

SETTINGS = Settings()
OFF = SETTINGS.replace(forgetting=ForgettingSettings(learn=False))
FORGET_ALL = learned.LearnedRetention(alpha=0.5, beta=0.0, gamma=0.5, bias=-8.0, kept_signals=1)


def fake_labels(points: list[list[float]], kept: list[float]) -> pref.Labels:
    """Labelled items at hand-made directions (a fake embedding space)."""
    matrix = np.array(points, dtype=np.float64)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    keys = tuple(("memory", n + 1) for n in range(len(points)))
    pairwise = matrix @ matrix.T
    usual = float(np.median(pairwise[~np.eye(len(keys), dtype=bool)]))
    return pref.Labels(keys, matrix, np.array(kept), usual, {k: n for n, k in enumerate(keys)})


def unit(v):
    v = np.array(v, dtype=np.float64)
    return v / np.linalg.norm(v)


FAMILY, ERRANDS, OTHER = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]


# -- the vote alone (a fake embedding space) ----------------------------------------------------------------
def test_items_like_restored_ones_score_above_zero_and_like_forgotten_ones_below():
    labels = fake_labels([FAMILY, [1, 0.1, 0], [1, 0, 0.1], ERRANDS, [0.1, 1, 0], [0, 1, 0.1]],
                         [1, 1, 1, 0, 0, 0])
    items = np.stack([unit([1, 0.05, 0.05]), unit([0.05, 1, 0.05])])
    family, errand = pref.vote(items @ labels.vectors.T, labels)
    assert family > 0.2 and errand < -0.2
    assert -learned.PREFERENCE_LIMIT <= errand < family <= learned.PREFERENCE_LIMIT


def test_nothing_is_said_without_both_kinds_of_answer_or_without_a_close_neighbour():
    items = np.stack([unit(FAMILY), unit(ERRANDS)])
    only_restores = fake_labels([FAMILY, [1, 0.1, 0], ERRANDS], [1, 1, 1])
    assert not only_restores.informative
    assert np.all(pref.vote(items @ only_restores.vectors.T, only_restores) == 0)
    labels = fake_labels([FAMILY, [1, 0.1, 0], ERRANDS, [0.1, 1, 0]], [1, 1, 0, 0])
    far = unit(OTHER)[None, :]  # no labelled item is closer to it than usual
    assert pref.vote(far @ labels.vectors.T, labels)[0] == pytest.approx(0.0)
    no_vector = np.full((1, len(labels.keys)), np.nan)
    assert pref.vote(no_vector, labels)[0] == 0.0


def test_more_close_neighbours_say_more_than_one():
    one = fake_labels([FAMILY, ERRANDS, [0, 0.9, 0.1], OTHER], [1, 0, 0, 0])
    many = fake_labels([FAMILY, [1, 0.1, 0], [1, 0, 0.1], ERRANDS, [0, 0.9, 0.1], OTHER], [1, 1, 1, 0, 0, 0])
    item = unit([1, 0.02, 0.02])[None, :]
    shrunk, sure = pref.vote(item @ one.vectors.T, one)[0], pref.vote(item @ many.vectors.T, many)[0]
    assert 0.0 < shrunk < sure <= learned.PREFERENCE_LIMIT


def test_an_item_is_not_its_own_neighbour():
    labels = fake_labels([FAMILY, ERRANDS, [0, 1, 0.1], OTHER], [1, 0, 0, 0])
    item = labels.vectors[:1]  # the restored item itself, back in the store
    assert pref.vote(item @ labels.vectors.T, labels)[0] > 0.3
    assert pref.vote(item @ labels.vectors.T, labels, own=np.array([0]))[0] == pytest.approx(0.0)
    assert pref.own_columns(labels, "memory", np.array([1, 99])).tolist() == [0, -1]
    assert pref.own_columns(labels, "episode", np.array([1])).tolist() == [-1]


# -- δ and the pass's step ---------------------------------------------------------------------------------
def test_an_item_is_measured_against_the_rate_of_its_own_kind():
    # facts mostly kept (uses), turns mostly let go: a turn whose neighbours are as mixed as turns usually are is
    # neither liked nor disliked, though against all the labels together it would look unwanted
    labels = fake_labels([FAMILY, [1, 0.1, 0], [1, 0, 0.1], [0.9, 0.1, 0.1], ERRANDS, [0.1, 1, 0], [0, 1, 0.1],
                          [0.1, 0.9, 0.1]], [1, 1, 1, 0, 1, 0, 0, 0])
    labels = replace(labels, keys=(*labels.keys[:4], *(("episode", n) for n in range(5, 9))))
    assert (labels.rate_of("memory"), labels.rate_of("episode"), labels.rate) == (0.75, 0.25, 0.5)
    turn = np.array([unit([0.05, 1, 0.05])])
    own_kind, overall = pref.vote(turn @ labels.vectors.T, labels, kind="episode")[0], pref.vote(
        turn @ labels.vectors.T, labels)[0]
    assert overall < own_kind
    assert labels.rate_of("summary") == labels.rate  # a kind without labels: the overall rate


def test_delta_rises_when_restored_items_are_liked_more_than_silenced_ones_and_stays_in_bounds():
    weights = learned.defaults(SETTINGS)
    for _ in range(200):
        weights = learned.batch_step(weights, [(0.2, 0.1, 0.1, 1.5), (0.2, 0.1, 0.1, -1.0), (0.2, 0.1, 0.1, -1.0)],
                                     [True, False, False], SETTINGS)
        assert learned.BOUNDS["delta"][0] <= weights.delta <= learned.BOUNDS["delta"][1]
    assert weights.delta > learned.DELTA_DEFAULT
    assert (weights.kept_signals, weights.forgot_signals) == (200, 400)


def test_a_pass_full_of_signals_moves_each_weight_at_most_one_step():
    """A week's review restores a dozen items at once: one step on their mean, not a dozen steps."""
    start = learned.defaults(SETTINGS)
    burst = learned.batch_step(start, [(0.3, 0.2, 0.1, 0.4)] * 50, [True] * 50, SETTINGS)
    assert np.all(np.abs(burst.vector() - start.vector()) <= learned.LEARNING_RATE + 1e-9)
    assert burst.kept_signals == 50 and burst.bias > start.bias
    assert learned.batch_step(start, [], [], SETTINGS) == start


def test_a_record_from_before_delta_loads_with_delta_at_its_default(db):
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (learned.META_KEY, json.dumps(
        {"alpha": 3.5, "beta": 2.0, "gamma": 4.0, "bias": -2.5, "kept_signals": 2, "forgot_signals": 1,
         "squared": [0.1, 0.2, 0.3, 0.4]})))
    weights = learned.load(db, SETTINGS)
    assert (weights.alpha, weights.delta, weights.squared) == (3.5, learned.DELTA_DEFAULT, (0.1, 0.2, 0.3, 0.4, 0.0))


# -- through the real store and MiniLM -----------------------------------------------------------------------
FAMILY_FACTS = ["The user's sister Ana adopted a grey kitten called Pepper.",
                "The user's brother Tom is learning to play the violin.",
                "The user's mother moved into a new flat near the river.",
                "The user's daughter Mia is starting a pottery class on Thursdays."]
ERRAND_FACTS = ["The dry cleaning has to be picked up before Friday.",
                "The electricity bill is overdue by a few days.",
                "The library books must go back this weekend.",
                "The car's oil change needs doing on the way home."]


def facts(db, embedder, texts):
    ids = [add_memory(db, text) for text in texts]
    index_memories(db, embedder, ids)
    return ids


def test_restored_family_facts_keep_other_family_facts_and_errands_left_alone_let_errands_go(db, clock, embedder):
    family, errands = facts(db, embedder, FAMILY_FACTS[:3]), facts(db, embedder, ERRAND_FACTS[:3])
    clock.advance(days=200)
    learned.save(db, FORGET_ALL)
    forget.forgetting_pass(db, SETTINGS)  # everything faded goes
    events = {e.item_id: e.id for e in forget.list_events(db)}
    for fact in family:
        forget.undo(db, events[fact])  # the user asks back every family fact, and no errand
    clock.advance(days=learned.SILENCE_DAYS + 1)
    labelled = pref.labels(db, db.now())
    assert labelled is not None and labelled.informative
    assert dict(zip(labelled.keys, labelled.kept)) == {**{("memory", f): 1.0 for f in family},
                                                      **{("memory", e): 0.0 for e in errands}}
    new_family, new_errand = facts(db, embedder, FAMILY_FACTS[3:])[0], facts(db, embedder, ERRAND_FACTS[3:])[0]
    clock.advance(days=200)
    learned.reset(db)
    table = forget.score_store(db, SETTINGS)["memory"]
    liked = dict(zip(table.ids.tolist(), table.preferences()))
    assert liked[new_family] > 0 > liked[new_errand]
    expected = forget.retention_probability(table.recency, table.relevance, table.importance, SETTINGS,
                                            preference=table.preferences(), delta=learned.DELTA_DEFAULT)
    assert np.allclose(table.retention, expected)
    by_id = dict(zip(table.ids.tolist(), table.retention))
    plain = forget.score_store(db, OFF)["memory"]  # learning off: no preference at all
    assert plain.preference is None
    off = dict(zip(plain.ids.tolist(), plain.retention))
    assert by_id[new_family] > off[new_family] and by_id[new_errand] < off[new_errand]

    forget.forgetting_pass(db, SETTINGS)  # learns from the restores and silences, δ among the weights
    weights = learned.load(db, SETTINGS)
    assert weights.signals == 6
    assert all(low <= getattr(weights, n) <= high for n, (low, high) in learned.BOUNDS.items())
    assert "likeness to what you restored" in learned.describe(db, SETTINGS)
    learned.reset(db)
    assert learned.load(db, SETTINGS) == learned.defaults(SETTINGS)
    assert learned.describe(db, SETTINGS).startswith("No weight learnt yet")  # the restores' uses still count


def test_a_fresh_user_is_scored_as_before_and_a_pinned_errand_is_never_forgotten(db, clock, embedder):
    errands = facts(db, embedder, ERRAND_FACTS)
    family = facts(db, embedder, FAMILY_FACTS)
    clock.advance(days=60)
    fresh = forget.score_store(db, SETTINGS)["memory"]
    assert fresh.preference is None  # no answer yet: nothing to vote with
    set_flag(db, errands[0], "pinned", True)
    learned.save(db, FORGET_ALL)
    forget.forgetting_pass(db, SETTINGS)
    events = {e.item_id: e.id for e in forget.list_events(db)}
    assert errands[0] not in events
    for fact in family[:2]:
        forget.undo(db, events[fact])
    clock.advance(days=learned.SILENCE_DAYS + 1)
    learned.save(db, replace(FORGET_ALL, delta=learned.BOUNDS["delta"][1]))  # preference at its strongest
    forget.forgetting_pass(db, SETTINGS.replace(forgetting=ForgettingSettings(strength="strong")))
    assert get_memory(db, errands[0]).forgotten_at is None


# -- what the user asked about and found (a reply used it, the user kept it) -----------------------------------
def _reply_using(assistant, memory_ids, clock) -> int:
    """A turn as the chat stores it (Assistant.finish): the reply drew on these memories of its context."""
    from core.assistant import PreparedTurn, UsedMemory
    used = tuple(UsedMemory(i, get_memory(assistant.db, i).statement, "recalled", 0.5) for i in memory_ids)
    prepared = PreparedTurn(None, "What did I tell you about that?", (), used, clock())
    return assistant.finish(prepared, "You told me: " + " ".join(m.text for m in used)).episode_id


def test_a_memory_a_reply_used_and_the_user_kept_counts_as_wanted(db, clock, embedder):
    from core.assistant import Assistant
    from core.store import turns
    ana, tom, mother = facts(db, embedder, FAMILY_FACTS[:3])
    cleaning, bill, books = facts(db, embedder, ERRAND_FACTS[:3])
    clock.advance(days=200)
    assistant = Assistant(db, embedder, None, None, SETTINGS, clock)
    _reply_using(assistant, [ana, tom], clock)  # asked about and found: kept
    rated = _reply_using(assistant, [mother], clock)
    turns.set_useful(db, rated, [mother], [])  # the usefulness rating says the reply did not use it
    vetoed = _reply_using(assistant, [cleaning], clock)
    assistant.veto(vetoed, cleaning)  # the user removed it from the reply
    forget.forgetting_pass(db, SETTINGS)  # the two errands no reply used have faded: they go
    assert {e.item_id for e in forget.list_events(db)} == {bill, books}
    clock.advance(days=learned.SILENCE_DAYS + 1)  # and nobody asks for them back
    labelled = pref.labels(db, db.now())
    assert labelled is not None and labelled.informative  # without a single restore
    assert dict(zip(labelled.keys, labelled.kept)) == {("memory", ana): 1.0, ("memory", tom): 1.0,
                                                      ("memory", bill): 0.0, ("memory", books): 0.0}
    new_family, new_errand = facts(db, embedder, FAMILY_FACTS[3:])[0], facts(db, embedder, ERRAND_FACTS[3:])[0]
    family_vote, errand_vote = pref.of_items(db, labelled, "memory", np.array([new_family, new_errand]))
    assert family_vote > 0 > errand_vote


def test_a_kept_memory_forgotten_later_and_left_alone_is_let_go(db, clock, embedder):
    from core.assistant import Assistant
    ana, cleaning = facts(db, embedder, [FAMILY_FACTS[0], ERRAND_FACTS[0]])
    assistant = Assistant(db, embedder, None, None, SETTINGS, clock)
    _reply_using(assistant, [ana, cleaning], clock)
    clock.advance(days=200)
    learned.save(db, FORGET_ALL)
    forget.forgetting_pass(db, SETTINGS)  # both go; the reply's label stands while the forgetting awaits an answer
    waiting = pref.labels(db, db.now())
    assert waiting is not None and set(waiting.kept) == {1.0}
    forget.undo(db, next(e.id for e in forget.list_events(db) if (e.item_type, e.item_id) == ("memory", ana)))
    clock.advance(days=learned.SILENCE_DAYS + 1)
    labelled = pref.labels(db, db.now())
    assert {k: y for k, y in zip(labelled.keys, labelled.kept) if k[0] == "memory"} == {("memory", ana): 1.0,
                                                                                      ("memory", cleaning): 0.0}


def test_turns_a_reply_quoted_count_as_wanted_too(db, clock, embedder):
    from core.memory.index import index_episodes
    from core.store import turns
    from core.store.episodes import add_episode
    texts = ("My sister Ana got a kitten.", "My brother Tom is learning the violin.", "The dry cleaning is due Friday.")
    ana, tom, cleaning = (add_episode(db, text, "Thanks for telling me.") for text in texts)
    index_episodes(db, embedder, [ana, tom, cleaning])
    turns.touch_episodes(db, [ana, tom], at=clock.advance(days=1))  # what Assistant.finish records of quoted turns
    assert turns.used_turns(db) == [(tom, clock()), (ana, clock())]
    labelled = pref.labels(db, db.now())
    assert labelled is not None and dict(zip(labelled.keys, labelled.kept)) == {("episode", ana): 1.0,
                                                                               ("episode", tom): 1.0}
    assert not labelled.informative  # uses alone, with nothing let go: every vote would be the rate itself
