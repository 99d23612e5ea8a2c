"""Reflection with the scripted model: tool loop, conservative hypotheses, rejected stays rejected, goals,
and the behavioural instructions for the next session."""
from __future__ import annotations

import pytest

from core.config import Settings
from core.errors import GenerationStopped, NotFound
from core.memory import reflect
from core.store import goals, hypotheses
from core.store.episodes import add_episode
from core.store.sessions import create_session, end_session, get_session
from tests.fakes import ScriptedStructuredModel

SETTINGS = Settings()
R = SETTINGS.reflection


def step(action="finish", query="", hyps=(), open_goals=(), closed_goals=()):
    return {"action": action, "query": query, "hypotheses": list(hyps), "open_goals": list(open_goals),
            "closed_goals": list(closed_goals)}


def session_with(db, *texts):
    session = create_session(db, "chat")
    ids = [add_episode(db, t, "OK.", session_id=session) for t in texts]
    end_session(db, session)
    return session, ids


def test_search_tool_then_hypothesis_with_checked_evidence(db):
    old = add_episode(db, "I always drink espresso after lunch")
    session, ids = session_with(db, "Can you recommend a coffee grinder?", "Espresso is my thing")
    model = ScriptedStructuredModel({"reflection_step": lambda messages, schema: (
        step("search", "espresso coffee") if len(model.calls) == 1 else
        step(hyps=[{"dimension": "interests", "claim": "Loves espresso", "evidence": [ids[1], old]}],
             open_goals=[{"question": "Which espresso machine do you own?", "reason": "recommendations",
                          "evidence": [ids[1]]}]))})
    report = reflect.reflect_session(db, SETTINGS, model, session)
    assert report.searches == ["espresso coffee"] and model.titles() == ["reflection_step", "reflection_step"]
    assert "I always drink espresso after lunch" in model.calls[1][1][-1].content  # the tool's result, quoted
    (hid,) = report.added
    h = hypotheses.get_hypothesis(db, hid)
    assert h.evidence_episode_ids == (old, ids[1])
    first_schema = reflect.prompt.reflection_schema(ids, [])
    assert first_schema["properties"]["hypotheses"]["items"]["properties"]["evidence"]["items"]["enum"] == ids
    assert h.confidence == pytest.approx(R.initial_confidence + R.evidence_step) and h.status == "open"
    assert [g.question for g in goals.list_goals(db)] == ["Which espresso machine do you own?"]
    assert get_session(db, session).reflected_at is not None and reflect.pending_sessions(db) == []
    assert report.instructions == ""  # nothing confirmed yet


def test_a_reflection_that_gives_way_to_the_user_writes_nothing_and_stays_waiting(db):
    session, ids = session_with(db, "Espresso is my thing", "I grind my own beans")
    claim = {"dimension": "interests", "claim": "Loves espresso", "evidence": [ids[0]]}
    model = ScriptedStructuredModel({"reflection_step": [step(hyps=[claim])]})
    with pytest.raises(GenerationStopped):
        reflect.reflect_session(db, SETTINGS, model, session, stop=lambda: True)
    assert hypotheses.list_hypotheses(db) == [] and reflect.pending_sessions(db) == [session]
    assert reflect.reflect_session(db, SETTINGS, model, session, stop=lambda: False).added  # later, whole


def test_a_conversation_ends_when_left_or_when_it_has_been_quiet(db, clock):
    left, _ = session_with(db, "Bye for now")  # ended by hand (/new, another chat)
    quiet = create_session(db, "quiet")
    add_episode(db, "What's a good pasta recipe?", "Try carbonara.", session_id=quiet)
    clock.advance(R.session_gap_minutes * 60 - 5)
    ongoing = create_session(db, "ongoing")
    add_episode(db, "And a wine with it?", "A dry white.", session_id=ongoing)
    assert reflect.ended_sessions(db, SETTINGS) == [left]
    clock.advance(10)  # the pasta chat has now been quiet for the whole gap
    assert reflect.ended_sessions(db, SETTINGS) == [left, quiet]
    assert reflect.pending_sessions(db, quiet_seconds=0) == [left, quiet, ongoing]  # `engram reflect`: all of them
    model = ScriptedStructuredModel({"reflection_step": [step()]})
    reflect.reflect_session(db, SETTINGS, model, quiet)
    assert reflect.ended_sessions(db, SETTINGS) == [left]
    clock.advance(1)
    add_episode(db, "One more: dessert?", "Tiramisu.", session_id=quiet)  # the user came back to it
    assert reflect.ended_sessions(db, SETTINGS) == [left]
    clock.advance(R.session_gap_minutes * 60 + 1)
    assert reflect.ended_sessions(db, SETTINGS) == [left, ongoing, quiet]  # oldest first


def test_tool_calls_are_bounded(db):
    session, _ = session_with(db, "hello")
    model = ScriptedStructuredModel({"reflection_step": [step("search", "anything")]})
    report = reflect.reflect_session(db, SETTINGS, model, session)
    assert len(report.searches) == R.max_tool_calls and len(model.calls) == R.max_tool_calls + 1


def test_confidence_rises_only_with_evidence_from_different_conversations(db):
    session, ids = session_with(db, "Please keep answers short", "Shorter please", "Too long again", "Brief!")
    claim = {"dimension": "communication_style", "claim": "Prefers short answers", "evidence": ids}
    model = ScriptedStructuredModel({"reflection_step": [step(hyps=[claim])]})
    (hid,) = reflect.reflect_session(db, SETTINGS, model, session).added
    assert hypotheses.get_hypothesis(db, hid).confidence == pytest.approx(R.initial_confidence)  # one chat: low
    again = reflect.upsert_hypothesis(db, SETTINGS, "communication_style", "prefers SHORT answers.", [ids[0]])
    assert again == hid and hypotheses.get_hypothesis(db, hid).confidence == pytest.approx(R.initial_confidence)
    later, (other,) = session_with(db, "Just the answer, no essay")
    reflect.upsert_hypothesis(db, SETTINGS, "communication_style", "Prefers short answers", [ids[0], other])
    h = hypotheses.get_hypothesis(db, hid)
    assert h.confidence == pytest.approx(R.initial_confidence + R.evidence_step) and len(h.evidence_episode_ids) == 5
    loose = add_episode(db, "Keep it brief")  # a turn outside any conversation is a source of its own
    reflect.upsert_hypothesis(db, SETTINGS, "communication_style", "Prefers short answers", [loose])
    assert hypotheses.get_hypothesis(db, hid).confidence == pytest.approx(R.initial_confidence + 2 * R.evidence_step)
    assert len(hypotheses.list_hypotheses(db)) == 1


def test_a_paraphrase_matches_by_meaning_with_an_embedder(db, embedder):
    e1, e2 = add_episode(db, "I go jogging every morning"), add_episode(db, "Morning runs are my routine")
    first = reflect.upsert_hypothesis(db, SETTINGS, "routine", "Goes running every morning", [e1], embedder=embedder)
    second = reflect.upsert_hypothesis(db, SETTINGS, "routine", "Runs every morning", [e2], embedder=embedder)
    assert first == second and len(hypotheses.list_hypotheses(db)) == 1


def test_a_rejected_hypothesis_does_not_return_on_the_same_evidence(db):
    session, ids = session_with(db, "I hate mornings", "Never schedule before 10", "Mornings are awful")
    claim = {"dimension": "routine", "claim": "Is not a morning person", "evidence": [ids[0]]}
    model = ScriptedStructuredModel({"reflection_step": [step(hyps=[claim])]})
    (hid,) = reflect.reflect_session(db, SETTINGS, model, session).added
    hypotheses.decide(db, hid, "rejected")
    report = reflect.reflect_session(db, SETTINGS, model, session)
    assert report.kept_rejected == [hid] and report.added == []
    assert hypotheses.get_hypothesis(db, hid).status == "rejected"
    assert reflect.upsert_hypothesis(db, SETTINGS, "routine", "Is not a morning person", [ids[0], ids[1]]) is None
    assert hypotheses.get_hypothesis(db, hid).status == "rejected"  # one new episode is not enough
    reopened = reflect.upsert_hypothesis(db, SETTINGS, "routine", "Is not a morning person", ids)
    assert reopened == hid and hypotheses.get_hypothesis(db, hid).status == "open"


def test_reflection_leaves_a_conflict_question_to_the_user(db):
    conflict = goals.open_goal(db, "Boston or Denver?", reason="reconcile: contradiction of a pinned memory",
                               memory_ids=[1, 2])
    session, ids = session_with(db, "I live in Denver now")
    answered = step(closed_goals=[{"goal_id": conflict, "answer": "Denver"}])
    model = ScriptedStructuredModel({"reflection_step": [answered]})
    report = reflect.reflect_session(db, SETTINGS, model, session)
    assert report.goals_closed == [] and goals.get_goal(db, conflict).status == "open"  # one click decides it


def test_goals_close_when_answered(db):
    gid = goals.open_goal(db, "Where do you live now?")
    session, ids = session_with(db, "I moved to Denver last month")
    model = ScriptedStructuredModel({"reflection_step": [step(closed_goals=[{"goal_id": gid, "answer": "Denver"}])]})
    report = reflect.reflect_session(db, SETTINGS, model, session)
    assert report.goals_closed == [gid] and goals.get_goal(db, gid).answer == "Denver"


def test_instructions_follow_the_confirmed_profile(db):
    session, ids = session_with(db, "Use metric units please")
    hid = hypotheses.add_hypothesis(db, "preferences", "Wants metric units", 0.5, [ids[0]])
    other = hypotheses.add_hypothesis(db, "style", "Likes jokes", 0.5, [ids[0]])
    hypotheses.decide(db, hid, "confirmed")
    hypotheses.decide(db, other, "confirmed")
    model = ScriptedStructuredModel({"reflection_step": [step()],
                                     "session_instructions": [{"instructions": "Use metric units; a joke is fine."}]})
    report = reflect.reflect_session(db, SETTINGS, model, session)
    assert report.instructions == reflect.session_instructions(db) == "Use metric units; a joke is fine."
    assert "Wants metric units" in model.calls[-1][1][-1].content
    hypotheses.decide(db, other, "rejected")  # the user changes their mind: honoured at once
    text = reflect.session_instructions(db)
    assert "Wants metric units" in text and "jokes" not in text
    hypotheses.decide(db, hid, "rejected")
    assert reflect.session_instructions(db) == ""


def test_bad_session_id_changes_nothing(db):
    model = ScriptedStructuredModel({})
    with pytest.raises(NotFound):
        reflect.reflect_session(db, SETTINGS, model, 42)
    assert model.calls == []


TINY_OUTPUT = ":Paris becausemilygredoppy˛ cenȜ w蝻 if anmembe becausemilSas tomorrowzevjorning"  # the tiny model's


def test_junk_hypotheses_and_goals_are_dropped_with_their_reasons(db):
    gid = goals.open_goal(db, "Where do you live now?")
    session, ids = session_with(db, "I like hiking on weekends", "I work as a nurse")
    junk = step(hyps=[{"dimension": "interests", "claim": TINY_OUTPUT, "evidence": [ids[0]]},
                      {"dimension": "interests", "claim": "Is a professional astronaut", "evidence": ids},
                      {"dimension": "6˦inw hasuse", "claim": "Likes hiking", "evidence": [ids[0]]}],
                open_goals=[{"question": TINY_OUTPUT, "reason": "", "evidence": [ids[0]]},
                            {"question": "What kind of music do you like?", "reason": "", "evidence": [ids[1]]}],
                closed_goals=[{"goal_id": gid, "answer": ":rue c[ȴit livesParisO thanksri"}])
    report = reflect.reflect_session(db, SETTINGS, ScriptedStructuredModel({"reflection_step": [junk]}), session)
    assert report.added == report.goals_opened == report.goals_closed == []
    assert hypotheses.list_hypotheses(db) == [] and [g.id for g in goals.list_goals(db)] == [gid]
    assert report.dropped_counts() == {"hypothesis not language": 1, "hypothesis not supported by its evidence": 1,
                                       "hypothesis dimension is not language": 1, "goal not language": 1,
                                       "goal not supported by its evidence": 1, "answer not language": 1}


def test_a_goal_closes_only_on_the_users_own_words(db):
    gid = goals.open_goal(db, "Where do you live now?")
    session, _ = session_with(db, "I moved to Denver last month")
    made_up = step(closed_goals=[{"goal_id": gid, "answer": "Lisbon"}])
    report = reflect.reflect_session(db, SETTINGS, ScriptedStructuredModel({"reflection_step": [made_up]}), session)
    assert report.goals_closed == [] and goals.get_goal(db, gid).status == "open"
    assert report.dropped == [("answer", "Lisbon", "not in the user's words")]


def test_support_by_meaning_keeps_a_paraphrase_and_drops_an_unrelated_claim(db, embedder):
    session, ids = session_with(db, "I go hiking every weekend", "I work as a nurse")
    claims = [{"dimension": "interests", "claim": "Enjoys outdoor activities", "evidence": [ids[0]]},
              {"dimension": "interests", "claim": "Likes jazz music", "evidence": [ids[1]]}]
    model = ScriptedStructuredModel({"reflection_step": [step(hyps=claims)]})
    report = reflect.reflect_session(db, SETTINGS, model, session, embedder=embedder)
    assert [h.claim for h in hypotheses.list_hypotheses(db)] == ["Enjoys outdoor activities"]
    [(what, claim, why)] = report.dropped
    assert claim == "Likes jazz music" and why.startswith("not supported by its evidence (words 0%, meaning 0.")


def test_evidence_must_still_exist(db):
    session, ids = session_with(db, "I like hiking on weekends", "Which boots for wet trails?")

    def deleted_meanwhile(messages, schema):
        db.execute("UPDATE episodes SET deleted_at = 1 WHERE id = ?", (ids[0],))  # the user deleted the turn
        return step(hyps=[{"dimension": "interests", "claim": "Likes hiking", "evidence": [ids[0]]}],
                    open_goals=[{"question": "Do you hike often?", "reason": "", "evidence": []}])
    model = ScriptedStructuredModel({"reflection_step": deleted_meanwhile})
    report = reflect.reflect_session(db, SETTINGS, model, session)
    assert report.added == [] and report.dropped_counts() == {"hypothesis cites no episode it was shown": 1,
                                                              "goal cites no episode it was shown": 1}
