"""Forgetting: retention scores, preview, the pass (archive facts, compact episodes into summaries), undo."""
from __future__ import annotations

import pytest

from core.config import ForgettingSettings, Settings
from core.errors import InvalidInput, NotFound
from core.memory import forget
from core.memory.index import index_episodes, index_memories
from core.store import history
from core.store.episodes import add_episode, get_episode, purge_episode_rows, trash_episode
from core.store.memories import add_memory, get_memory, purge_memory_rows, set_flag, trash_memory
from core.store.sessions import create_session

SETTINGS = Settings()


def old_store(db, clock, embedder):
    """Day 0: a session about a trip and some facts; then 100 quiet days and a recent chat about cooking."""
    session = create_session(db, "trip")
    trip = [add_episode(db, "I am flying to Lisbon in March", "Nice!", session_id=session),
            add_episode(db, "My sister Ana lives in Porto", "Good to know.", session_id=session)]
    ana = add_memory(db, "The user's sister Ana lives in Porto.", subject="Ana", relation="lives in",
                     object="Porto", source_episode_ids=[trip[1]])
    stale = add_memory(db, "The user once liked crossword puzzles.")
    pinned = add_memory(db, "The user's passport number ends in 42.")
    set_flag(db, pinned, "pinned", True)
    allergy = add_memory(db, "The user is allergic to penicillin.", critical=True)
    index_episodes(db, embedder, trip)
    index_memories(db, embedder, [ana, stale, pinned, allergy])
    clock.advance(days=100)
    recent = [add_episode(db, f"Cooking question {i}: how long to roast vegetables?") for i in range(3)]
    young = add_memory(db, "The user roasts vegetables at 200 degrees.")
    index_episodes(db, embedder, recent)
    index_memories(db, embedder, [young])
    return dict(trip=trip, ana=ana, stale=stale, pinned=pinned, allergy=allergy, young=young, recent=recent)


def test_retention_formula_follows_the_seed():
    assert forget.recency_score(0.0, 30.0) == pytest.approx(1.0)
    assert forget.recency_score(30.0, 30.0) == pytest.approx(0.5)
    fresh = forget.retention_probability(1.0, 0.0, 0.0, SETTINGS)
    stale = forget.retention_probability(0.0, 0.0, 0.0, SETTINGS)
    important = forget.retention_probability(0.0, 0.0, 1.0, SETTINGS)
    assert stale < forget.threshold(SETTINGS) < fresh < important
    gentle = SETTINGS.replace(forgetting=ForgettingSettings(strength="gentle"))
    assert forget.threshold(gentle) < forget.threshold(SETTINGS)


def test_preview_lists_what_would_go_with_its_score_and_spares_the_untouchable(db, clock, embedder):
    ids = old_store(db, clock, embedder)
    doomed = forget.preview(db, SETTINGS)
    kinds = {(s.item_type, s.item_id) for s in doomed}
    assert ("memory", ids["stale"]) in kinds and ("memory", ids["ana"]) in kinds
    assert {("episode", e) for e in ids["trip"]} <= kinds
    for spared in ("pinned", "allergy", "young"):
        assert ("memory", ids[spared]) not in kinds
    assert not {("episode", e) for e in ids["recent"]} & kinds  # younger than min_age_days
    assert all(s.retention < forget.threshold(SETTINGS) for s in doomed)
    assert [s.retention for s in doomed] == sorted(s.retention for s in doomed)
    assert "recency" in doomed[0].reason(forget.threshold(SETTINGS))
    assert get_memory(db, ids["stale"]).forgotten_at is None  # a preview changes nothing


def test_the_previews_head_and_count_are_the_full_previews(db, clock, embedder):
    """`engram forget --preview` prints the first --limit items and counts the rest without making them all."""
    old_store(db, clock, embedder)
    everything = forget.preview(db, SETTINGS)
    assert len(everything) >= 4
    for limit in (0, 1, 3, len(everything), len(everything) + 5):
        assert forget.preview_top(db, SETTINGS, limit) == (everything[:limit], len(everything))


def test_relevance_to_recent_context_raises_retention(db, clock, embedder):
    cooking = add_memory(db, "The user likes roasting vegetables with rosemary.")
    chess = add_memory(db, "The user's chess club meets on Thursdays.")
    index_memories(db, embedder, [cooking, chess])
    clock.advance(days=40)
    recent = [add_episode(db, "What temperature should I roast carrots and potatoes at?")]
    index_episodes(db, embedder, recent)
    table = forget.score_store(db, SETTINGS)["memory"]
    by_id = {int(i): n for n, i in enumerate(table.ids)}
    assert table.relevance[by_id[cooking]] > table.relevance[by_id[chess]]
    assert table.retention[by_id[cooking]] > table.retention[by_id[chess]]


def test_a_pass_archives_facts_and_compacts_episodes_into_a_summary_that_keeps_their_facts(db, clock, embedder):
    ids = old_store(db, clock, embedder)
    result = forget.forgetting_pass(db, SETTINGS, embedder=embedder)
    assert ids["stale"] in result.archived and ids["ana"] in result.archived
    assert set(ids["trip"]) <= set(result.compacted) and len(result.summaries) == 1
    for survivor in ("pinned", "allergy", "young"):
        assert get_memory(db, ids[survivor]).is_active
    stale = get_memory(db, ids["stale"])
    assert stale.status == "forgotten"
    assert [h.action for h in history.history(db, stale.id)] == ["create", "forget"]
    summary = get_memory(db, result.summaries[0])
    assert summary.kind == "summary" and summary.is_active
    assert "Ana lives in Porto" in summary.statement and "Lisbon" in summary.statement
    assert set(summary.source_episode_ids) == set(ids["trip"])
    for episode_id in ids["trip"]:
        episode = get_episode(db, episode_id)
        assert episode.forgotten_at is not None and episode.summary_id == summary.id
    events = forget.list_events(db)
    assert len(events) == len(result.events)
    assert all(e.retention < forget.threshold(SETTINGS) and "retention" in e.reason for e in events)
    assert {e.summary_id for e in events if e.item_type == "episode"} == {summary.id}
    # the summary holding forgotten episodes is never forgotten itself, however old it grows
    clock.advance(days=400)
    again = forget.forgetting_pass(db, SETTINGS)
    assert summary.id not in again.archived and get_memory(db, summary.id).is_active


def test_undo_restores_until_purged(db, clock, embedder):
    ids = old_store(db, clock, embedder)
    forget.forgetting_pass(db, SETTINGS)
    events = {(e.item_type, e.item_id): e for e in forget.list_events(db)}
    restored = forget.undo(db, events[("memory", ids["stale"])].id)
    assert restored.restored_at is not None and get_memory(db, ids["stale"]).is_active
    assert history.history(db, ids["stale"])[-1].action == "restore"
    with pytest.raises(InvalidInput):
        forget.undo(db, restored.id)
    episode_event = events[("episode", ids["trip"][0])]
    forget.undo(db, episode_event.id)
    assert get_episode(db, ids["trip"][0]).forgotten_at is None
    assert ids["stale"] not in forget.forgetting_pass(db, SETTINGS).archived  # the undo counted as a use
    trash_memory(db, ids["ana"])
    purge_memory_rows(db, [ids["ana"]])
    with pytest.raises(NotFound):
        forget.undo(db, events[("memory", ids["ana"])].id)
    trash_episode(db, ids["trip"][1])
    purge_episode_rows(db, [ids["trip"][1]])
    with pytest.raises(NotFound):
        forget.undo(db, events[("episode", ids["trip"][1])].id)
    with pytest.raises(NotFound):
        forget.undo(db, 9999)
    with pytest.raises(InvalidInput):
        forget.undo(db, "seven")


def test_forgetting_curves_fall_and_say_when(db, clock, embedder):
    ids = old_store(db, clock, embedder)
    curves = forget.forgetting_curves(db, SETTINGS, days=[0, 10, 30, 90])
    assert curves and all(a >= b for _, curve in curves for a, b in zip(curve, curve[1:]))
    young = add_memory(db, "The user bought a bicycle.")
    clock.advance(days=8)
    table = forget.score_store(db, SETTINGS)["memory"]
    scored = table.row(int(list(table.ids).index(young)))
    when = forget.days_until_forgotten(scored, SETTINGS)
    assert when is not None and 0 < when < 365
    assert forget.project(scored, SETTINGS, [when])[0] < forget.threshold(SETTINGS)
    assert ids["pinned"] not in {s.item_id for s, _ in curves if s.item_type == "memory"}
