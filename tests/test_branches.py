"""Editing a sent message (core.store.branches through the assistant): the edited turn's line leaves the shown path
with no turn lost, the model is given only the shown branch as the conversation, and either version can be shown."""
from __future__ import annotations

from core.assistant import Assistant
from core.config import Settings
from core.memory.conversation import load_conversation
from core.store import branches
from core.store.sessions import create_session
from tests.fakes import ScriptedChatModel


def _turn(assistant, session_id, text, *, edits=None):
    prepared = assistant.prepare(session_id, text, dial="off", edits=edits)
    reply = "".join(c.text for c in assistant.stream(prepared))
    return assistant.finish(prepared, reply, "stop", edits=edits).episode_id


def _history(chat) -> list[str]:
    return [m.content for m in chat.calls[-1] if m.role == "user"]


def test_an_edit_branches_keeps_every_turn_and_gives_the_model_the_shown_branch_only(db, embedder, clock):
    chat = ScriptedChatModel(lambda messages: f"Reply {len(messages)}.")
    assistant = Assistant(db, embedder, chat, None, Settings(), clock)
    session = create_session(db, "Practice")
    first = _turn(assistant, session, "I practise scales")
    second = _turn(assistant, session, "Which key should I start in?")
    third = _turn(assistant, session, "And after that?")
    count_before = db.scalar("SELECT count(*) FROM episodes")

    edited = _turn(assistant, session, "Which minor key should I start in?", edits=second)
    assert _history(chat) == ["I practise scales", "Which minor key should I start in?"]  # not the other branch
    assert db.scalar("SELECT count(*) FROM episodes") == count_before + 1  # nothing removed
    shown = load_conversation(db, session)
    assert [t.episode_id for t in shown.turns] == [first, edited]
    assert [t.version for t in shown.turns] == [(1, 1), (2, 2)]

    after_edit = _turn(assistant, session, "Thanks")
    assert _history(chat) == ["I practise scales", "Which minor key should I start in?", "Thanks"]

    branches.show_version(db, edited, second)  # "‹": the first version, with the line it had
    shown = load_conversation(db, session)
    assert [t.episode_id for t in shown.turns] == [first, second, third]
    assert shown.turns[1].version == (1, 2)
    _turn(assistant, session, "One more")
    assert _history(chat) == ["I practise scales", "Which key should I start in?", "And after that?", "One more"]

    branches.show_version(db, second, edited)  # "›": the edit's line as it was left, its own turns whole
    assert [t.episode_id for t in load_conversation(db, session).turns] == [first, edited, after_edit]


def test_an_edit_of_an_edit_is_a_third_version_of_the_same_message(db, embedder, clock):
    assistant = Assistant(db, embedder, ScriptedChatModel(["Fine."]), None, Settings(), clock)
    session = create_session(db, "Names")
    original = _turn(assistant, session, "Call me Lina")
    second = _turn(assistant, session, "Call me Lena", edits=original)
    third = _turn(assistant, session, "Call me Lina Costa", edits=second)
    assert branches.versions(db, third) == [original, second, third]
    assert [t.version for t in load_conversation(db, session).turns] == [(3, 3)]
