"""The idle job and a turn whose learning always fails: the other turns are learned, the failing one is tried on a
later pass, given up after three tries — said in the job's message, which the Jobs panel and `engram jobs list`
show — and never planned for again. Real store, embedder, scheduler and handler; the model is scripted."""
from __future__ import annotations

from app.services.scheduling import plan
from core.assistant import pending_learning
from core.store import turn_learning
from core.store.episodes import get_episode
from core.store.memories import list_memories
from tests.conftest import FakeClock
from tests.fakes import ScriptedStructuredModel
from tests.test_cli_learning import run
from tests.test_scheduling_learning import AWAY, _facts_for, _reflection, _scheduler, _store_waiting_turns, \
    services_fixture  # noqa: F401 - the fixture

NEW = {"decision": "new", "target": 0, "reason": "new"}


def test_a_turn_that_always_fails_holds_up_nothing_and_is_given_up_after_three_passes(services):
    clock = FakeClock()
    services.db.clock = clock  # the store's time: when a failed turn may be tried again
    user = {"idle": AWAY}
    services.model = ScriptedStructuredModel({"engram_facts": _cello_fails(_facts_for(user)),
                                              "reconcile_decision": [NEW]})
    cello, *others = _store_waiting_turns(services, 3)  # the failing turn is the oldest: first in line
    scheduler = _scheduler(services, user)

    first = scheduler.run_job(_reflection(scheduler, services).id)
    assert first.state == "done", first.last_error
    assert sorted(m.statement for m in list_memories(services.db)) == ["The user plays the oboe.",
                                                                     "The user plays the violin."]
    assert first.message == ("learned 2 turns the chat left for later (2 facts kept); 1 turn could not be "
                             "learned, tried again later (RuntimeError: [METAL] Command buffer execution failed: "
                             "Insufficient Memory); reflected on 0 conversations")
    assert pending_learning(services.db) == [] and _planned_reflections(scheduler, services) == []

    for _ in range(2):
        clock.now += turn_learning.RETRY_AFTER * turn_learning.MAX_ATTEMPTS  # its pause is over: planned again
        assert pending_learning(services.db) == [cello]
        last = scheduler.run_job(_reflection(scheduler, services).id)
        assert last.state == "done", last.last_error
    assert last.message == ("gave up learning 1 turn after 3 tries (RuntimeError: [METAL] Command buffer execution "
                            "failed: Insufficient Memory); reflected on 0 conversations")
    clock.now += 30 * 86400.0
    assert pending_learning(services.db) == [] and _planned_reflections(scheduler, services) == []
    assert get_episode(services.db, cello).metadata["learning"] == "failed"  # the turn itself is kept
    assert services.model.titles().count("engram_facts") == 2 + 3


def _cello_fails(learned):
    """An extraction that always fails on the cello turn (a model running out of memory on it, say)."""
    def extract(messages, schema):
        if "cello" in messages[-1].content:
            raise RuntimeError("[METAL] Command buffer execution failed: Insufficient Memory")
        return learned(messages, schema)
    return extract


def _planned_reflections(scheduler, services) -> list:
    return [j for j in plan(scheduler, services.settings) if j.kind == "reflection"]


def test_engram_reflect_says_which_turn_could_not_be_learned_and_learns_the_others(services, capsys):
    services.model = ScriptedStructuredModel({"engram_facts": _cello_fails(_facts_for({"idle": AWAY})),
                                              "reconcile_decision": [NEW]})
    cello, violin, oboe = _store_waiting_turns(services, 3)
    assert run(services, "reflect") == 0
    progress = capsys.readouterr().err
    assert (f"[1/3] turn {cello}: could not be learned, tried again later (RuntimeError: [METAL] Command buffer "
            "execution failed: Insufficient Memory)") in progress
    assert f"[3/3] turn {oboe}: 1 fact kept" in progress
    assert pending_learning(services.db) == []  # the failed one waits for its pause to end
