"""`engram reflect` says on its line what reflection left out and why (issue 17)."""
from __future__ import annotations

import pytest

from app.cli.main import build_parser
from core.store import hypotheses
from core.store.episodes import add_episode
from core.store.sessions import create_session, end_session
from tests.fakes import ScriptedStructuredModel
from tests.test_cli_learning import ScriptedServices


@pytest.fixture
def services(tmp_path, embedder):
    svc = ScriptedServices.from_data_dir(tmp_path / "home")
    svc._embedder = embedder
    yield svc
    svc.close()


def test_reflect_prints_what_it_left_out_with_reasons(services, capsys):
    session = create_session(services.db)
    episode = add_episode(services.db, "Short answers please", session_id=session)
    end_session(services.db, session)
    services.model = ScriptedStructuredModel({"reflection_step": [{
        "action": "finish", "query": "", "closed_goals": [],
        "hypotheses": [{"dimension": "style", "claim": "Prefers short answers", "evidence": [episode]},
                       {"dimension": "style", "claim": ":Paris becausemilygredoppy˛ cenȜ", "evidence": [episode]},
                       {"dimension": "work", "claim": "Is a professional astronaut", "evidence": [episode]}],
        "open_goals": [{"question": "Which pets do you have?", "reason": "", "evidence": []}]}]})
    args = build_parser().parse_args(["reflect"])
    assert args.func(args, services) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"conversation {session}: 1 new hypothesis, 0 strengthened, 0 kept rejected, "
                           "0 goals opened, 0 closed")
    assert line.endswith("; left out: 1 hypothesis not language, 1 hypothesis not supported by its evidence, "
                         "1 goal cites no episode it was shown")
    assert [h.claim for h in hypotheses.list_hypotheses(services.db)] == ["Prefers short answers"]


def test_reflect_shows_progress_and_first_learns_turns_left_waiting(services, capsys):
    """Issue 17.4: which conversation, n of m, what was kept and left out — on stderr, the results on stdout; a
    turn whose learning the chat skipped (metadata learning: pending) is learned first."""
    sessions = []
    for text in ("Short answers please", "I play the cello every evening"):
        session = create_session(services.db)
        add_episode(services.db, text, "ok", session_id=session, metadata={"learning": "pending"})
        end_session(services.db, session)
        sessions.append(session)
    services.model = ScriptedStructuredModel({
        "reflection_step": [{"action": "finish", "query": "", "closed_goals": [], "hypotheses": [],
                             "open_goals": []}],
        "engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": []}]})
    args = build_parser().parse_args(["reflect"])
    assert args.func(args, services) == 0
    out, err = capsys.readouterr()
    assert "learning 2 turns the chat left for later" in err
    assert f"[1/2] conversation {sessions[0]}: reading 1 turn" in err
    assert f"[2/2] conversation {sessions[1]}: reading 1 turn" in err
    assert f"[2/2] conversation {sessions[1]}: kept 0, left out 0" in err
    assert len(out.splitlines()) == 2
    assert services.db.scalar("SELECT count(*) FROM episodes WHERE json_extract(metadata, '$.learning') = "
                              "'pending'") == 0
