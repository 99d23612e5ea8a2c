"""The chips under a reply say which memories it drew on (core.memory.attribution) and which were only recalled —
as the reply ends and when the conversation is opened again; a reply stored before Engram told them apart keeps
one "Recalled:" row. Offscreen, the real store and MiniLM embedder, a scripted chat model that quotes."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("pytestqt")

from app.ui.chat_widgets import MessageWidget  # noqa: E402
from core.memory.index import index_memories  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from core.store.memories import add_memory  # noqa: E402
from core.store.sessions import create_session  # noqa: E402
from tests.fakes import ScriptedChatModel, ScriptedStructuredModel  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402
from tests.test_gui_chat import TURN_MS, _window  # noqa: E402

VIOLIN, FLAT = "User's sister Ana is learning the violin", "User's sister Ana moved near the river"


def captions(reply: MessageWidget) -> list[str]:
    """The chips row as read left to right: captions, and each chip's memory as stored."""
    widgets = (reply.chips.itemAt(i).widget() for i in range(reply.chips.count()))
    return [w.open_button.toolTip().split("\n")[0] if hasattr(w, "open_button") else w.text() for w in widgets]


def test_a_finished_reply_sorts_its_chips_by_what_it_drew_on(qtbot):
    reply = MessageWidget("assistant", "She is learning the violin.")
    qtbot.addWidget(reply)
    reply.set_used([SimpleNamespace(id=1, text=FLAT, why=""), SimpleNamespace(id=2, text=VIOLIN, why="")])
    assert captions(reply) == ["Recalled:", FLAT, VIOLIN]  # while it is written: not known yet
    reply.show_drew_on([2])
    assert captions(reply) == ["Drew on:", VIOLIN, "Also recalled:", FLAT]
    drawn, recalled = reply.chip_widgets()
    assert "This reply drew on it." in drawn.open_button.toolTip()
    assert "did not draw on it" in recalled.open_button.toolTip()
    reply.show_drew_on([])
    assert captions(reply) == ["Also recalled:", FLAT, VIOLIN]  # each group in the context's order


def test_the_chat_shows_what_the_reply_drew_on_then_and_when_reopened(qtbot, tmp_path, embedder):
    win = _window(qtbot, tmp_path, chat=ScriptedChatModel(["Ana is learning the violin."]), embedder=embedder)
    try:
        def facts(db):
            ids = [add_memory(db, text) for text in (VIOLIN, FLAT)]
            index_memories(db, embedder, ids)
            old = add_episode(db, "What about Ana?", "She is fine.", session_id=create_session(db, "before"))
            db.execute("INSERT INTO reply_memories(episode_id, memory_id, rank) VALUES (?, ?, 0)", (old, ids[0]))
        on_db_lane(win, facts)
        panel = win.show_panel("chat")
        with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS) as finished:
            panel.send("What is my sister Ana learning these days?")
        shown = captions(finished.args[0])
        assert shown[:2] == ["Drew on:", VIOLIN] and "Also recalled:" in shown and FLAT in shown
        session = panel.session_id
        panel.new_conversation()
        panel.open_session(session)
        qtbot.waitUntil(lambda: len(panel.replies()) == 1, timeout=10000)
        assert captions(panel.replies()[0]) == shown  # the same, read back from the store
        before = on_db_lane(win, lambda db: db.scalar("SELECT id FROM sessions WHERE title = 'before'"))
        panel.open_session(before)
        qtbot.waitUntil(lambda: len(panel.replies()) == 1 and panel.session_id == before, timeout=10000)
        assert captions(panel.replies()[0]) == ["Recalled:", VIOLIN]  # stored before: not known
    finally:
        win.panels["chat"].shutdown()
        win.runner.shutdown(wait=True)
        win.services.close()


def test_a_use_the_rating_finds_in_other_words_joins_drew_on_once_learned(qtbot, tmp_path, embedder):
    """"She plays a string instrument" repeats no word of the violin memory; the usefulness rating calls both
    memories useful and the reply's meaning supports the violin only: its chip moves up when learning ends."""
    win = _window(qtbot, tmp_path, chat=ScriptedChatModel(["She plays a string instrument."]), embedder=embedder)
    win.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": [1, 2]}]})
    try:
        def facts(db):
            ids = [add_memory(db, text) for text in (VIOLIN, FLAT)]
            index_memories(db, embedder, ids)
        on_db_lane(win, facts)
        panel = win.show_panel("chat")
        with qtbot.waitSignal(panel.learned, timeout=TURN_MS):
            panel.send("What is my sister Ana learning these days?")
        reply = panel.replies()[-1]
        assert captions(reply)[:2] == ["Drew on:", VIOLIN] and captions(reply)[-2:] == ["Also recalled:", FLAT]
    finally:
        win.panels["chat"].shutdown()
        win.runner.shutdown(wait=True)
        win.services.close()
