"""Undo chains of replaced facts (issue 37, item 4): for a one-at-a-time relation, after any sequence of saying a new
city, delete, "this is wrong", restore and undo, at most one city is active and it is the newest one the user has
not removed. Lisbon → Porto → Berlin, then deleting Porto used to reopen Lisbon beside Berlin; delete 2, delete 3,
restore 2 printed "restored" and left no home at all.

The facts go through what a plainly said sentence goes through (said_facts → reconcile_fact's said decision →
apply_decision); the model is never asked for a said fact whose relation is stored, so a script stands in for it."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.config import Settings
from core.errors import InvalidInput
from core.memory.manage import MemoryManager
from core.memory.reconcile import reconcile_fact
from core.memory.said_facts import said_facts
from core.store.db import open_memory_db
from tests.conftest import FakeClock
from tests.fakes import HashEmbedder, ScriptedStructuredModel

CITIES = ("Lisbon", "Porto", "Berlin", "Madrid", "Oslo", "Quito")
MODEL = ScriptedStructuredModel({"reconcile_decision": lambda m, s: {"decision": "new", "target": 1, "reason": "x"}})


class Home:
    """One store, the user's homes in it, and what the user did to each (the model of what must hold)."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.db = open_memory_db(clock=self.clock)
        self.embedder = HashEmbedder()
        self.manager = MemoryManager(self.db, self.embedder)
        self.said: list[int] = []  # memory ids, oldest first

    def say(self, city: str) -> None:
        (fact,) = said_facts(f"I live in {city}.", "", self.clock(), Settings()).facts
        outcome = reconcile_fact(self.db, self.embedder, MODEL, fact, None, Settings())
        if outcome.memory_id not in self.said:
            self.said.append(outcome.memory_id)
        self.clock.advance(3600)

    def act(self, action: str, index: int) -> None:
        if not self.said:
            return
        memory_id = self.said[index % len(self.said)]
        try:
            if action == "delete":
                self.manager.delete(memory_id)
            elif action == "reject":
                self.manager.reject(memory_id)
            elif action == "restore":
                self.manager.restore(memory_id)
            elif action == "undo":  # Undo under the reply that taught it
                self.manager.delete(memory_id, reason="undone under the reply it was learned from")
        except InvalidInput:
            pass  # already in the trash, or not in it: refused, nothing changed
        self.clock.advance(300)

    def active(self) -> list[int]:
        return [r[0] for r in self.db.execute(
            "SELECT id FROM active_memories WHERE relation = 'lives_in' ORDER BY id")]

    def newest_kept(self) -> int | None:
        kept = [r[0] for r in self.db.execute(
            "SELECT id FROM memories WHERE relation = 'lives_in' AND deleted_at IS NULL AND forgotten_at IS NULL")]
        return max(kept) if kept else None


def chain(*steps: tuple[str, int | str]) -> Home:
    home = Home()
    for action, what in steps:
        home.say(what) if action == "say" else home.act(action, int(what) - 1)
    return home


def test_deleting_the_middle_of_three_homes_leaves_the_newest_alone():
    home = chain(("say", "Lisbon"), ("say", "Porto"), ("say", "Berlin"), ("delete", 2))
    assert home.active() == [3]


def test_delete_newest_then_middle_then_restore_newest_leaves_only_the_newest():
    home = chain(("say", "Lisbon"), ("say", "Porto"), ("say", "Berlin"), ("delete", 3), ("delete", 2),
                 ("restore", 3))
    assert home.active() == [3]


def test_delete_middle_then_newest_then_restore_middle_leaves_the_middle():
    home = chain(("say", "Lisbon"), ("say", "Porto"), ("say", "Berlin"), ("delete", 2), ("delete", 3),
                 ("restore", 2))
    assert home.active() == [2]


steps = st.lists(st.one_of(
    st.tuples(st.just("say"), st.sampled_from(CITIES)),
    st.tuples(st.sampled_from(["delete", "reject", "restore", "undo"]), st.integers(0, 7)),
), min_size=1, max_size=14)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_after_any_sequence_at_most_one_home_is_active_and_it_is_the_newest_kept(sequence):
    home = Home()
    for action, what in sequence:
        home.say(what) if action == "say" else home.act(action, what)
        active = home.active()
        assert len(active) <= 1, (sequence, active)
        newest = home.newest_kept()
        assert active == ([] if newest is None else [newest]), (sequence, active, newest)
