"""Reconcile: duplicate / update / contradiction / new, nothing lost, protected facts ask the user."""
from __future__ import annotations

import pytest

from core.config import Settings
from core.memory.engram import Fact
from core.memory.index import index_memories
from core.errors import InvalidInput
from core.memory.reconcile import NOTHING_RELATED, reconcile_fact, resolve_conflict
from core.store import edges, goals
from core.store.episodes import add_episode
from core.store.history import history
from core.store.memories import add_memory, count_memories, get_memory, set_flag
from tests.fakes import ScriptedStructuredModel

SETTINGS = Settings()


def decide(decision: str, target: int = 1, reason: str = "scripted") -> ScriptedStructuredModel:
    return ScriptedStructuredModel({"reconcile_decision": [{"decision": decision, "target": target,
                                                            "reason": reason}]})


def city(name: str) -> Fact:
    return Fact("user", "lives_in", name, f"The user lives in {name}.", 0.9)


@pytest.fixture
def boston(db, embedder):
    memory_id = add_memory(db, "The user lives in Boston.", subject="user", relation="lives_in", object="Boston",
                           confidence=0.7)
    index_memories(db, embedder, [memory_id])
    return memory_id


def test_a_contradiction_closes_the_old_fact_and_links_the_new_one(db, embedder, clock, boston):
    episode = add_episode(db, "I moved to Denver.", "Congratulations!")
    clock.advance(days=30)
    outcome = reconcile_fact(db, embedder, decide("contradiction"), city("Denver"), episode, SETTINGS)
    assert outcome.decision == "contradiction" and outcome.target_id == boston
    old, new = get_memory(db, boston), get_memory(db, outcome.memory_id)
    assert old.invalidated_at == clock.now and old.valid_to == clock.now and old.superseded_by == new.id
    assert new.is_active and new.source_episode_ids == (episode,)
    assert [h.action for h in history(db, boston)] == ["create", "invalidate"]
    assert history(db, boston)[1].old_value["object"] == "Boston"
    assert edges.get_edge(db, boston, new.id, "supersedes").weight == 1.0


def test_a_duplicate_raises_confidence_and_access_instead_of_adding_a_row(db, embedder, boston):
    episode = add_episode(db, "I live in Boston, as I said.")
    before = count_memories(db)
    outcome = reconcile_fact(db, embedder, decide("duplicate"), city("Boston"), episode, SETTINGS)
    memory = get_memory(db, boston)
    assert outcome.decision == "duplicate" and outcome.memory_id == boston
    assert count_memories(db) == before
    assert memory.confidence == pytest.approx(1.0) and memory.access_count == 1
    assert memory.source_episode_ids == (episode,)


def test_the_same_turn_said_again_is_no_new_evidence(db, embedder, boston):
    """A turn whose learning gave way is learned again from the start: its duplicate raised the confidence once."""
    episode = add_episode(db, "I live in Boston, as I said.")
    reconcile_fact(db, embedder, decide("duplicate"), Fact("user", "lives_in", "Boston", "The user lives in Boston",
                                                           0.5), episode, SETTINGS)
    once = get_memory(db, boston)
    again = reconcile_fact(db, embedder, decide("duplicate"), city("Boston"), episode, SETTINGS)
    assert again.decision == "duplicate" and "already learned from this turn" in again.reason
    assert get_memory(db, boston).confidence == once.confidence and get_memory(db, boston).access_count == 1
    later = add_episode(db, "Boston, still.")
    reconcile_fact(db, embedder, decide("duplicate"), city("Boston"), later, SETTINGS)
    assert get_memory(db, boston).access_count == 2  # another turn saying it is evidence


def test_an_update_rewrites_in_place_and_keeps_the_old_value_in_history(db, embedder, boston):
    fact = Fact("user", "lives_in", "Boston, in Back Bay", "The user lives in Back Bay, Boston.", 0.8)
    outcome = reconcile_fact(db, embedder, decide("update"), fact, None, SETTINGS)
    assert outcome.decision == "update" and outcome.memory_id == boston
    assert get_memory(db, boston).statement == "The user lives in Back Bay, Boston."
    assert history(db, boston)[-1].old_value["statement"] == "The user lives in Boston."


@pytest.mark.parametrize("flag", ["pinned", "protected", "permanent", "critical"])
def test_an_untouchable_fact_is_never_closed_the_user_is_asked(db, embedder, boston, flag):
    set_flag(db, boston, flag, True)
    before = count_memories(db)
    outcome = reconcile_fact(db, embedder, decide("contradiction"), city("Denver"), None, SETTINGS)
    assert outcome.decision == "asked" and outcome.memory_id is None
    assert get_memory(db, boston).is_active and count_memories(db) == before  # nothing new is recalled
    goal = goals.get_goal(db, outcome.goal_id)
    (stored, waiting) = goal.memory_ids
    assert goal.status == "open" and stored == boston and "Denver" in goal.question
    assert get_memory(db, waiting).status == "trashed" and "Denver" in get_memory(db, waiting).statement


def test_answering_a_conflict_with_the_new_fact_replaces_the_pinned_one(db, embedder, boston):
    set_flag(db, boston, "pinned", True)
    set_flag(db, boston, "protected", True)
    outcome = reconcile_fact(db, embedder, decide("contradiction"), city("Denver"), None, SETTINGS)
    _, denver = goals.get_goal(db, outcome.goal_id).memory_ids
    goal = resolve_conflict(db, outcome.goal_id, "new")
    assert goal.status == "closed" and goal.answer == "the new one"
    new, old = get_memory(db, denver), get_memory(db, boston)
    assert new.is_active and new.pinned and new.protected  # what the user guarded stays guarded
    assert not old.is_active and old.superseded_by == denver  # closed, kept in history: never overwritten
    assert [h.action for h in history(db, boston)][-1] == "invalidate"
    assert "learning goal" in history(db, denver)[-3].reason  # restored because the user chose it
    with pytest.raises(InvalidInput, match="already closed"):
        resolve_conflict(db, outcome.goal_id, "old")


def test_answering_a_conflict_with_the_old_fact_keeps_it_and_bad_answers_change_nothing(db, embedder, boston):
    set_flag(db, boston, "critical", True)
    outcome = reconcile_fact(db, embedder, decide("contradiction"), city("Denver"), None, SETTINGS)
    _, denver = goals.get_goal(db, outcome.goal_id).memory_ids
    with pytest.raises(InvalidInput, match="keep must be 'new' or 'old'"):
        resolve_conflict(db, outcome.goal_id, "both")
    other = goals.open_goal(db, "Which climbing grade are you working towards?")
    with pytest.raises(InvalidInput, match="not a question about two conflicting memories"):
        resolve_conflict(db, other, "new")
    assert goals.get_goal(db, outcome.goal_id).status == "open"
    goal = resolve_conflict(db, outcome.goal_id, "old", answer="Still Boston, the move fell through")
    assert goal.answer == "Still Boston, the move fell through"
    assert get_memory(db, boston).is_active and get_memory(db, denver).status == "trashed"


def test_nothing_similar_or_a_bad_target_is_a_new_fact(db, embedder, boston):
    empty_model = ScriptedStructuredModel({})
    tea = Fact("user", "likes", "green tea", "The user likes green tea.", 0.8)
    outcome = reconcile_fact(db, embedder, decide("duplicate", target=0), tea, None, SETTINGS)
    assert outcome.decision == "new" and outcome.memory_id != boston and get_memory(db, boston).is_active
    assert empty_model.calls == []


def test_the_first_fact_in_an_empty_store_asks_no_model(db, embedder):
    model = ScriptedStructuredModel({})
    outcome = reconcile_fact(db, embedder, model, city("Oslo"), None, SETTINGS)
    assert outcome.decision == "new" and model.calls == []
    assert get_memory(db, outcome.memory_id).statement == "The user lives in Oslo."


def test_a_verdict_against_an_unrelated_fact_changes_nothing(db, embedder, boston):
    """Issue 17: a weak model calling "likes green tea" a contradiction of "lives in Boston" would close a true
    fact; a target of another subject and relation that means something else is left alone. Where nothing stored is
    related, the model is not asked at all (its verdict could only be "new")."""
    unrelated = [Fact("user", "likes", "green tea", "The user likes green tea.", 0.8),
                 Fact("user", "plays", "chess", "The user plays chess.", 0.8),
                 Fact("user", "owns", "a bicycle", "The user owns a bicycle.", 0.8)]
    alone = ScriptedStructuredModel({})  # nothing stored is related to green tea: the model is not even asked
    outcome = reconcile_fact(db, embedder, alone, unrelated[0], None, SETTINGS)
    assert alone.calls == [] and outcome.decision == "new" and outcome.reason == NOTHING_RELATED
    related = [("The user likes black tea.", "likes", "black tea"), ("The user plays the piano.", "plays", "piano"),
               ("The user owns a car.", "owns", "a car")]  # one related fact each: now the model is asked
    index_memories(db, embedder, [add_memory(db, s, subject="user", relation=r, object=o) for s, r, o in related])
    unrelated = [Fact("user", "likes", "jasmine tea", "The user likes jasmine tea.", 0.8), *unrelated[1:]]
    for decision, fact in zip(("contradiction", "update", "duplicate"), unrelated):
        def against_boston(messages, schema, decision=decision):
            lines = messages[-1].content.split("<<<STORED\n")[1].split("\nSTORED>>>")[0].splitlines()
            number = next(int(line.split(".")[0]) for line in lines if "Boston" in line)
            return {"decision": decision, "target": number, "reason": "scripted"}
        model = ScriptedStructuredModel({"reconcile_decision": against_boston})
        outcome = reconcile_fact(db, embedder, model, fact, None, SETTINGS)
        assert model.calls and outcome.decision == "new" and outcome.target_id is None
        assert outcome.reason.startswith(f"the model called it a {decision} of memory {boston}")
    memory = get_memory(db, boston)
    assert memory.is_active and memory.statement == "The user lives in Boston." and memory.confidence == 0.7
    assert [h.action for h in history(db, boston)] == ["create"]
    moved = Fact("user", "moved_to", "Denver", "The user moved to Denver.", 0.9)  # another relation, same topic
    assert reconcile_fact(db, embedder, decide("contradiction"), moved, None, SETTINGS).decision == "contradiction"


def test_a_duplicate_must_name_the_same_thing_or_the_new_fact_is_kept(db, embedder, boston):
    """A weak model's "duplicate" of "lives in Denver" against "lives in Boston" raised Boston's confidence and
    never stored Denver (scripted here). A duplicate's object shares a word with the stored one's."""
    outcome = reconcile_fact(db, embedder, decide("duplicate"), city("Denver"), None, SETTINGS)
    assert outcome.decision == "new" and outcome.target_id is None
    assert outcome.reason.startswith(f"the model called it a duplicate of memory {boston}, which names 'Boston'")
    assert get_memory(db, outcome.memory_id).object == "Denver" and get_memory(db, boston).confidence == 0.7


def test_a_duplicate_in_other_words_is_still_one(db, embedder, boston):
    said_again = Fact("user", "lives_in", "boston, MA", "The user lives in Boston, MA.", 0.9)
    outcome = reconcile_fact(db, embedder, decide("duplicate"), said_again, None, SETTINGS)
    assert outcome.decision == "duplicate" and outcome.memory_id == boston
