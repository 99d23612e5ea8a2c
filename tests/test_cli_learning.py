"""`engram reflect|forget|hypotheses|goals` against a real store in a temporary data folder."""
from __future__ import annotations

import json
import time

import pytest

from app.cli.main import build_parser, run_cli
from app.cli.arguments import UsageError
from app.services.wiring import Services
from core.memory import reflect
from core.store import goals, hypotheses
from core.store.episodes import add_episode
from core.store.memories import add_memory, get_memory
from core.store.sessions import create_session, end_session
from core.errors import InvalidInput
from tests.fakes import ScriptedStructuredModel
from tests.test_assistant import fact_reply

DAY = 86400.0


class ScriptedServices(Services):
    """Services whose structured model is a scripted fake (reflection's logic is tested, not the model)."""

    model: ScriptedStructuredModel

    def structured_model(self):
        return self.model


@pytest.fixture
def services(tmp_path, embedder):
    svc = ScriptedServices.from_data_dir(tmp_path / "home")
    svc._embedder = embedder
    yield svc
    svc.close()


def run(services, *argv):
    args = build_parser().parse_args(list(argv))
    return args.func(args, services)


def test_reflect_then_confirm_reject_edit_hypotheses(services, capsys):
    db = services.db
    assert run(services, "reflect") == 0 and "nothing to reflect on" in capsys.readouterr().out
    session = create_session(db)
    episode = add_episode(db, "Short answers please", session_id=session)
    end_session(db, session)
    services.model = ScriptedStructuredModel({"reflection_step": [
        {"action": "finish", "query": "", "open_goals": [], "closed_goals": [],
         "hypotheses": [{"dimension": "style", "claim": "Prefers short answers", "evidence": [episode]}]}]})
    assert run(services, "reflect") == 0
    assert "1 new hypothesis," in capsys.readouterr().out
    (h,) = hypotheses.list_hypotheses(db)
    assert run(services, "hypotheses", "list") == 0 and "Prefers short answers" in capsys.readouterr().out
    assert run(services, "hypotheses", "confirm", str(h.id)) == 0
    assert "Prefers short answers" in reflect.session_instructions(db)
    assert run(services, "hypotheses", "edit", str(h.id), "--claim", "Prefers very short answers") == 0
    assert hypotheses.get_hypothesis(db, h.id).claim == "Prefers very short answers"
    assert run(services, "hypotheses", "reject", str(h.id)) == 0
    assert "not come back" in capsys.readouterr().out and reflect.session_instructions(db) == ""
    assert run(services, "hypotheses", "list", "--json", "--status", "rejected") == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "rejected"


def test_forget_preview_run_log_undo(services, capsys):
    db = services.db
    old = add_memory(db, "The user once owned a typewriter.", created_at=time.time() - 300 * DAY)
    assert run(services, "forget", "--preview") == 0
    assert f"memory   {old:>6}  retention" in capsys.readouterr().out
    assert get_memory(db, old).is_active
    assert run(services, "forget", "--run") == 0 and "archived 1 fact," in capsys.readouterr().out
    assert get_memory(db, old).status == "forgotten"
    assert run(services, "forget", "--log", "--json") == 0
    (event,) = json.loads(capsys.readouterr().out)
    assert run(services, "forget", "--undo", str(event["id"])) == 0
    assert get_memory(db, old).is_active


def test_goals_list_and_close(services, capsys):
    gid = goals.open_goal(services.db, "Do you still live in Boston?", reason="two cities")
    assert run(services, "goals", "list") == 0 and "Boston" in capsys.readouterr().out
    assert run(services, "goals", "close", str(gid), "--answer", "Denver now") == 0
    assert goals.get_goal(services.db, gid).status == "closed"
    assert run(services, "goals", "list") == 0 and "no open learning goals" in capsys.readouterr().out


def test_a_conflict_question_is_answered_by_keeping_the_new_fact(services, embedder, capsys):
    from core.config import Settings
    from core.memory.engram import Fact
    from core.memory.index import index_memories
    from core.memory.reconcile import reconcile_fact
    from core.store.memories import set_flag
    db = services.db
    boston = add_memory(db, "The user lives in Boston.", subject="user", relation="lives_in", object="Boston")
    index_memories(db, embedder, [boston])
    set_flag(db, boston, "pinned", True)
    model = ScriptedStructuredModel({"reconcile_decision": [{"decision": "contradiction", "target": 1,
                                                              "reason": "moved"}]})
    denver = Fact("user", "lives_in", "Denver", "The user lives in Denver.", 0.9)
    goal = reconcile_fact(db, embedder, model, denver, None, Settings()).goal_id
    assert run(services, "goals", "list") == 0 and "--keep new or --keep old" in capsys.readouterr().out
    with pytest.raises(UsageError, match="invalid choice"):
        run(services, "goals", "close", str(goal), "--keep", "sideways")  # only new or old
    assert goals.get_goal(db, goal).status == "open"
    capsys.readouterr()
    assert run(services, "goals", "close", str(goal), "--keep", "new") == 0
    out = capsys.readouterr().out
    assert "closed: the new one" in out and "is closed and kept in its history" in out
    assert not get_memory(db, boston).is_active
    assert get_memory(db, goals.get_goal(db, goal).memory_ids[1]).pinned


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    home = str(tmp_path / "h")
    assert run_cli(["--data-dir", home, "hypotheses", "confirm", "9"]) == 1
    assert "no hypothesis with id 9" in capsys.readouterr().err
    assert run_cli(["--data-dir", home, "forget", "--undo", "3"]) == 1
    assert "no forgetting event" in capsys.readouterr().err
    assert run_cli(["--data-dir", home, "goals", "close", "1"]) == 1
    assert run_cli(["--data-dir", home, "hypotheses", "edit", "1"]) == 1
    assert "--claim" in capsys.readouterr().err
    with pytest.raises(UsageError, match="not allowed with"):
        build_parser().parse_args(["forget", "--run", "--preview"])
    assert run_cli(["--data-dir", home, "forget", "--run", "--preview"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def _given_up_turn(services) -> int:
    """A stored chat turn whose learning raised MAX_ATTEMPTS times (the model ran out of memory)."""
    from core.assistant import Assistant
    from core.store import turn_learning

    def out_of_memory(_messages, _schema):
        raise RuntimeError("[METAL] Command buffer execution failed: Insufficient Memory")
    episode = add_episode(services.db, "I play the cello every evening", "Lovely!", session_id=create_session(
        services.db), metadata={"learning": "pending"})
    assistant = Assistant(services.db, services.embedder, None,
                          ScriptedStructuredModel({"engram_facts": out_of_memory}), services.settings)
    for _ in range(turn_learning.MAX_ATTEMPTS):
        with pytest.raises(RuntimeError):
            assistant.learn(assistant.stored_turn(episode))
    return episode


def test_relearn_tries_again_the_turns_engram_gave_up_on(services, capsys):
    from core.store import turn_learning
    assert run(services, "relearn") == 0
    assert "nothing to try again" in capsys.readouterr().out
    episode = _given_up_turn(services)
    services.model = ScriptedStructuredModel({
        "engram_facts": [{"facts": [fact_reply("The user plays the cello.", "cello", "plays")]}],
        "reconcile_decision": [{"decision": "new", "target": 0, "reason": "new"}]})
    assert run(services, "relearn") == 0
    captured = capsys.readouterr()
    assert f"turn {episode}: 1 fact kept" in captured.err
    assert turn_learning.given_up(services.db) == []
    assert services.db.scalar("SELECT count(*) FROM memories WHERE statement = 'The user plays the cello.'") == 1
    with pytest.raises(InvalidInput, match="learned already"):
        run(services, "relearn", str(episode))  # once learned, not again
    assert services.model.titles().count("engram_facts") == 1


def test_relearn_of_a_turn_that_fails_again_says_it_will_be_tried_later(services, capsys):
    episode = _given_up_turn(services)

    def still_failing(_messages, _schema):
        raise RuntimeError("[METAL] Command buffer execution failed: Insufficient Memory")
    services.model = ScriptedStructuredModel({"engram_facts": still_failing})
    assert run(services, "relearn", str(episode)) == 0
    assert f"turn {episode}: could not be learned, tried again later" in capsys.readouterr().err
