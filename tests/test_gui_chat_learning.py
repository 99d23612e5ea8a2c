"""Learning after the reply in the window (issue 17 part 4): a message that waits for a reply goes before the
learning of the turn before it, and what that turn taught still shows under its reply when learning ends later —
offscreen, the real store, MiniLM and the tiny MLX model (extraction scripted: the tiny model's words hold no
fact that grounding keeps)."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from tests.fakes import ScriptedStructuredModel  # noqa: E402
from tests.test_gui_chat import TURN_MS, _fact, window_fixture  # noqa: E402,F401 - the fixture

FACTS = {"cello": _fact("user", "plays", "cello", "User plays the cello"),
         "bicycle": _fact("user", "owns", "bicycle", "User owns a red bicycle")}


def _type_and_send(qtbot, panel, text: str) -> None:
    qtbot.mouseClick(panel.composer, Qt.LeftButton)
    qtbot.keyClicks(panel.composer, text)
    qtbot.keyClick(panel.composer, Qt.Key_Return)


def test_a_waiting_message_is_answered_before_the_turn_before_it_is_learned(qtbot, window):
    events: list[str] = []

    def extract(messages, _schema):
        said = messages[-1].content
        word = next(w for w in FACTS if w in said)
        events.append(f"extract {word}")
        return {"facts": [FACTS[word]]}
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": extract, "usefulness_rating": [{"useful": []}],
         "reconcile_decision": [{"decision": "new", "target": 0, "reason": "different"}]})
    panel = window.show_panel("chat")
    panel.reply_finished.connect(lambda reply: events.append(f"reply {len(panel.replies())}"))
    panel.turns.chunk.connect(lambda _text: events.append("chunk") if events[-1:] != ["chunk"] else None)
    learned = []
    panel.learned.connect(learned.append)
    _type_and_send(qtbot, panel, "I play the cello every evening")
    qtbot.waitUntil(lambda: panel.reply is not None and bool(panel.reply.text), timeout=TURN_MS)  # streaming
    _type_and_send(qtbot, panel, "My bicycle is red")  # waits for the first reply
    qtbot.waitUntil(lambda: len(learned) == 2, timeout=TURN_MS)
    assert events.index("reply 2") < events.index("extract cello")  # the second reply did not wait for learning
    assert events[events.index("reply 1") + 1] == "chunk"  # its first words came right after the first reply
    first, second = panel.replies()
    qtbot.waitUntil(lambda: bool(first.learned_rows()) and bool(second.learned_rows()), timeout=10000)
    assert [r.open_button.text() for r in first.learned_rows()] == ["You play the cello"]  # under its own reply
    assert [r.open_button.text() for r in second.learned_rows()] == ["You own a red bicycle"]
    assert not panel.turns.to_learn and panel.turns.learning is None


def test_a_turn_engram_stopped_trying_to_learn_says_so_and_try_again_learns_it(qtbot, window):
    from core.assistant import Assistant
    from core.store import turn_learning
    from tests.guikit import on_db_lane
    failing = {"now": True}

    def extract(_messages, _schema):
        if failing["now"]:
            raise RuntimeError("[METAL] Command buffer execution failed: Insufficient Memory")
        return {"facts": [FACTS["cello"]]}
    script = {"engram_facts": extract, "usefulness_rating": lambda _m, _s: {"useful": []},
              "reconcile_decision": lambda _m, _s: {"decision": "new", "target": 0, "reason": "different"}}
    window.services.structured_model = lambda: ScriptedStructuredModel(script)
    panel = window.show_panel("chat")
    _type_and_send(qtbot, panel, "I play the cello every evening")
    qtbot.waitUntil(lambda: bool(panel.replies()) and bool(panel.replies()[-1].learned_note.text()), timeout=TURN_MS)
    reply = panel.replies()[-1]
    assert reply.learned_note.text() == ("Nothing was learned from this yet: the computer ran out of memory while "
                                         "reading it. Engram will try again later.")
    assert not reply.retry_button.isVisibleTo(reply)

    def fail_again(db):  # the idle pass's two later tries fail the same way
        learner = Assistant(db, window.services.embedder, None, ScriptedStructuredModel(script),
                            window.services.settings)
        for _ in range(turn_learning.MAX_ATTEMPTS - 1):
            with pytest.raises(RuntimeError):
                learner.learn(learner.stored_turn(reply.episode_id))
        return [g.episode_id for g in turn_learning.given_up(db)]
    assert on_db_lane(window, fail_again) == [reply.episode_id]

    panel.open_session(panel.session_id)  # back to the conversation later: the note says Engram stopped
    qtbot.waitUntil(lambda: bool(panel.replies()) and bool(panel.replies()[-1].learned_note.text()), timeout=10000)
    reply = panel.replies()[-1]
    assert reply.learned_note.text() == (
        "Nothing was learned from this: the computer ran out of memory while reading it. Engram tried 3 times and "
        "stopped trying.")
    assert reply.retry_button.isVisibleTo(reply) and reply.retry_button.text() == "Try again"

    failing["now"] = False
    qtbot.mouseClick(reply.retry_button, Qt.LeftButton)
    assert not reply.retry_button.isVisibleTo(reply)  # one click: no second try queued behind it
    qtbot.waitUntil(lambda: bool(reply.learned_rows()), timeout=TURN_MS)
    assert [r.open_button.text() for r in reply.learned_rows()] == ["You play the cello"]
    assert not reply.learned_note.isVisibleTo(reply)
    assert on_db_lane(window, lambda db: turn_learning.given_up(db)) == []
    assert on_db_lane(window, lambda db: db.scalar(
        "SELECT count(*) FROM memories WHERE statement = 'User plays the cello'")) == 1


# Stored wording -> what the chat shows (core.second_person); what it cannot surely turn stays as stored.
SAID_TO_YOU = [
    ("User plays the cello", "You play the cello"),
    ("The user's sister Ana lives in Porto", "Your sister Ana lives in Porto"),
    ("User preferences include dark mode", "User preferences include dark mode"),  # not plainly a verb: as stored
    ("Ana adopted a grey kitten", "Ana adopted a grey kitten"),
]


@pytest.mark.parametrize("stored, shown", SAID_TO_YOU)
def test_remembered_under_a_reply_is_said_to_you_as_about_you_says_it(qtbot, stored, shown):
    from app.ui.chat_learning import LearnedFact, LearnedRow
    row = LearnedRow(LearnedFact(1, stored, True))
    qtbot.addWidget(row)
    assert row.open_button.text() == shown
    assert row.open_button.toolTip().startswith(shown + "\n")
    row.show_memory(type("Shown", (), {"statement": "User owns a red bicycle", "deleted": False})())
    assert row.open_button.text() == "You own a red bicycle"  # edited elsewhere: said to you too


def _given_up_in_a_conversation(db, embedder) -> tuple[int, int]:
    """A stored chat turn Engram stopped trying to learn (three failures), in a conversation of its own."""
    from core.store import turn_learning
    from core.store.episodes import add_episode
    from core.store.sessions import create_session
    session = create_session(db, "Music")
    episode = add_episode(db, "I play the cello every evening", "Lovely!", session_id=session,
                          metadata={"learning": "pending"})
    for n in range(turn_learning.MAX_ATTEMPTS):
        claim = turn_learning.claim(db, episode, f"test:{n}")
        turn_learning.failed(db, claim, RuntimeError("[METAL] Insufficient Memory"))
    assert [g.episode_id for g in turn_learning.given_up(db)] == [episode]
    return session, episode


@pytest.mark.parametrize("error, reason", [
    ("RuntimeError: [METAL] Command buffer execution failed: Insufficient Memory",
     "the computer ran out of memory while reading it"),
    ("MemoryError: ", "the computer ran out of memory while reading it"),
    ("ValueError: something else", "something went wrong while reading it"),
    ("ModelError: The message and memory context need 5231 tokens but only 4096 fit in this model's context window",
     "the conversation was too long for the model to read in one go"),
    ("ModelError: The adapter in /x does not fit this model: shape mismatch", "something went wrong while reading it"),
    ("ValueError: no benefit found", "something went wrong while reading it"),
])
def test_why_learning_failed_is_said_plainly(error, reason):
    from app.ui.chat_learning import plain_reason
    assert plain_reason(error) == reason


def test_try_again_without_a_model_says_so_and_changes_nothing(qtbot, tmp_path, embedder):
    from core.store import turn_learning
    from tests.guikit import on_db_lane
    from tests.test_gui_chat import _window
    window = _window(qtbot, tmp_path, embedder=embedder)  # no chat model chosen
    try:
        session, episode = on_db_lane(window, _given_up_in_a_conversation, embedder)
        panel = window.show_panel("chat")
        panel.open_session(session)
        qtbot.waitUntil(lambda: bool(panel.replies()) and panel.replies()[-1].retry_button.isVisibleTo(
            panel.replies()[-1]), timeout=10000)
        reply = panel.replies()[-1]
        qtbot.mouseClick(reply.retry_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: reply.learned_note.text().startswith("It could not be tried again"), timeout=20000)
        assert [g.episode_id for g in on_db_lane(window, lambda db: turn_learning.given_up(db))] == [episode]
    finally:
        window.panels["chat"].shutdown()
        window.runner.shutdown(wait=True)
        window.services.close()
