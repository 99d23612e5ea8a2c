"""The chat panel, offscreen, against a real store, the real MiniLM embedder and the real tiny MLX model."""
from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace
from typing import Iterator

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.conditions import LEARNING, REPLYING, ModelGate  # noqa: E402
from core.config import GenerationSettings, Settings  # noqa: E402
from core.errors import ModelError  # noqa: E402
from core.memory import recall_learning  # noqa: E402
from core.memory.conversation import load_conversation  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from core.store.memories import add_memory  # noqa: E402
from core.store.sessions import create_session, get_session, list_sessions, search_sessions, trash_session  # noqa: E402
from tests.fakes import ScriptedStructuredModel  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402

TURN_MS = 120_000  # a whole turn on the tiny model, including loading the embedder's intents


def _counts(db) -> dict[str, int]:
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                       "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts%' "
                                       "AND name NOT LIKE '%vec%'")]
    return {t: db.scalar(f'SELECT count(*) FROM "{t}"') for t in tables}


def _window(qtbot, tmp_path, *, chat=None, embedder=None, max_tokens=48) -> MainWindow:
    settings = Settings().replace(generation=GenerationSettings(max_tokens=max_tokens))
    services = Services(settings=settings, data_dir=tmp_path / "home", _embedder=embedder, chat=chat)
    win = MainWindow(services)
    qtbot.addWidget(win)
    win.show()
    return win


@pytest.fixture(name="window")  # imported by name window_fixture where other GUI test files share it
def window_fixture(qtbot, tmp_path, tiny_engine, embedder):
    win = _window(qtbot, tmp_path, chat=tiny_engine, embedder=embedder)
    yield win
    win.panels["chat"].shutdown()
    win.runner.shutdown(wait=True)
    win.services.close()


on_db = on_db_lane  # the store's connection belongs to the window's db lane


def scalar(window, sql: str, *params):
    return on_db(window, lambda db: db.scalar(sql, params))


def row(window, sql: str, *params):
    return on_db(window, lambda db: db.query_one(sql, params))


def _send_and_wait(qtbot, panel, text: str):
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS) as finished:
        panel.send(text)
    return finished.args[0]


def _typed_and_sent(qtbot, panel, text: str):
    """As a user sends a message: a click in the composer, the text typed, Return; the finished reply."""
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS) as finished:
        qtbot.mouseClick(panel.composer, Qt.LeftButton)
        qtbot.keyClicks(panel.composer, text)
        qtbot.keyClick(panel.composer, Qt.Key_Return)
    return finished.args[0]


@contextmanager
def _scripted_window(qtbot, tmp_path, chat, embedder) -> Iterator[MainWindow]:
    """A window on a scripted chat model, its lanes and store closed afterwards."""
    window = _window(qtbot, tmp_path, chat=chat, embedder=embedder)
    try:
        yield window
    finally:
        window.panels["chat"].shutdown()
        window.runner.shutdown(wait=True)
        window.services.close()


# -- the store side of the conversation list -----------------------------------------------------------

def test_sessions_search_trash_and_history(db):
    tea = create_session(db, "Tea")
    trip = create_session(db, "Trip planning")
    first = add_episode(db, "I like jasmine tea", "Noted!", session_id=tea)
    add_episode(db, "Book a train to Lyon", "Done.", session_id=trip)
    liked = add_memory(db, "User likes jasmine tea")
    vetoed = add_memory(db, "User dislikes coffee")
    db.execute("INSERT INTO reply_memories(episode_id, memory_id, rank) VALUES (?, ?, 0), (?, ?, 1)",
               (first, liked, first, vetoed))
    db.execute("UPDATE reply_memories SET vetoed_at = 1 WHERE memory_id = ?", (vetoed,))
    assert [s.id for s in search_sessions(db, "lyon")] == [trip]  # found by a turn's text
    assert [s.id for s in search_sessions(db, "TEA")] == [tea]  # and by title, any case
    assert search_sessions(db, "100%") == []  # LIKE wildcards are literal
    conversation = load_conversation(db, tea)
    assert [(t.user_text, [u.id for u in t.used]) for t in conversation.turns] == [("I like jasmine tea", [liked])]
    trash_session(db, trip)
    assert [s.id for s in list_sessions(db)] == [tea]
    assert {s.id for s in list_sessions(db, include_deleted=True)} == {tea, trip}  # hidden, not removed


# -- widgets without a model ----------------------------------------------------------------------------

def test_no_model_shows_the_way_to_the_models_panel(qtbot, tmp_path):
    win = _window(qtbot, tmp_path)
    panel = win.show_panel("chat")
    qtbot.waitUntil(panel.banner.isVisible, timeout=20000)
    assert "No chat model" in panel.banner_text.text()
    qtbot.mouseClick(panel.models_button, Qt.LeftButton)
    assert win.stack.currentWidget() is win.panels["models"]
    win.show_panel("chat")
    with qtbot.waitSignal(panel.turns.idle, timeout=20000):
        panel.send("hello?")
    status = panel.replies()[-1].status.text()
    assert "No chat model" in status and "Models" in status
    assert "engram models" not in status  # a person in the window is led to the Models panel, not a terminal
    assert panel.composer.toPlainText() == "hello?"  # nothing answered, nothing was kept: the message is not lost
    assert "engram models" not in panel.banner_text.text()  # the GUI's way is the Models panel, not the CLI
    win.runner.shutdown(wait=True)


def test_a_chosen_model_that_is_missing_is_named(qtbot, tmp_path):
    settings = Settings().replace(chat_model="some-org/gone-4bit")
    win = MainWindow(Services(settings=settings, data_dir=tmp_path / "home"))
    qtbot.addWidget(win)
    win.show()
    panel = win.show_panel("chat")
    qtbot.waitUntil(panel.banner.isVisible, timeout=20000)
    assert "some-org/gone-4bit" in panel.banner_text.text()
    win.runner.shutdown(wait=True)


def test_return_sends_and_shift_return_adds_a_line(qtbot, tmp_path):
    win = _window(qtbot, tmp_path)
    panel = win.show_panel("chat")
    sent = []
    panel.composer.submitted.disconnect()
    panel.composer.submitted.connect(sent.append)
    qtbot.keyClicks(panel.composer, "first line")
    qtbot.keyClick(panel.composer, Qt.Key_Return, Qt.ShiftModifier)
    qtbot.keyClicks(panel.composer, "second")
    assert sent == [] and panel.composer.toPlainText() == "first line\nsecond"
    qtbot.keyClick(panel.composer, Qt.Key_Return)
    assert sent == ["first line\nsecond"]
    win.runner.shutdown(wait=True)


def test_conversation_list_new_rename_delete_and_search(qtbot, tmp_path):
    win = _window(qtbot, tmp_path)
    a, b = on_db(win, create_session, "Cello lessons"), on_db(win, create_session, "Garden")
    panel = win.show_panel("chat")
    sessions = panel.sessions
    sessions.reload()

    def titles() -> list[str]:
        return [sessions.list.item(i).text() for i in range(sessions.list.count())]
    qtbot.waitUntil(lambda: titles() == ["Garden", "Cello lessons"], timeout=10000)
    sessions.rename(a, "Cello with Ana")
    qtbot.waitUntil(lambda: "Cello with Ana" in titles(), timeout=10000)
    sessions.search.setText("ana")
    qtbot.waitUntil(lambda: [s.id for s in sessions.sessions] == [a], timeout=10000)
    sessions.search.clear()
    qtbot.waitUntil(lambda: len(sessions.sessions) == 2, timeout=10000)
    sessions.list.setCurrentRow([s.id for s in sessions.sessions].index(b))
    assert panel.session_id == b
    sessions.list.setCurrentRow([s.id for s in sessions.sessions].index(a))
    assert panel.session_id == a  # leaving a conversation ends it, so idle-time reflection may review it
    qtbot.waitUntil(lambda: on_db(win, get_session, b).ended_at is not None, timeout=10000)
    assert on_db(win, get_session, a).ended_at is None
    sessions.list.setCurrentRow([s.id for s in sessions.sessions].index(b))
    sessions.delete(b)
    qtbot.waitUntil(lambda: [s.id for s in sessions.sessions] == [a], timeout=10000)
    assert panel.session_id is None
    win.new_chat()  # ⌘N
    assert panel.session_id is None and not panel.message_widgets()
    win.runner.shutdown(wait=True)


# -- real turns on the tiny model -----------------------------------------------------------------------

class _RecordingGate(ModelGate):
    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []

    def chat_started(self, activity: str = REPLYING) -> None:
        self.started.append(activity)
        super().chat_started(activity)


def test_reply_streams_is_stored_and_rated(qtbot, window):
    panel = window.show_panel("chat")
    on_db(window, add_memory, "User's favourite tea is jasmine")
    window.background = SimpleNamespace(model_gate=_RecordingGate(), stop=lambda: None)  # as the idle-time loop
    chunks, gate_held = [], []
    panel.turns.chunk.connect(chunks.append)
    panel.turns.chunk.connect(lambda _text: gate_held.append(window.background.model_gate.chat_active()))
    with qtbot.waitSignal(panel.learned, timeout=TURN_MS):
        reply = _send_and_wait(qtbot, panel, "Which tea should I buy?")
    assert chunks and reply.text == "".join(chunks)
    assert all(gate_held) and not window.background.model_gate.chat_active()  # jobs gave way, then resume
    assert window.background.model_gate.started == [REPLYING, LEARNING]  # the Jobs panel says which
    episode = row(window, "SELECT * FROM episodes ORDER BY id DESC LIMIT 1")
    assert episode["id"] == reply.episode_id and episode["assistant_text"] == reply.text
    assert panel.session_id == episode["session_id"]
    chips = reply.chip_widgets()
    assert [c.memory_id for c in chips] and "jasmine" in chips[0].open_button.toolTip()
    assert scalar(window, "SELECT count(*) FROM reply_memories WHERE episode_id = ?", reply.episode_id) == len(chips)
    qtbot.mouseClick(reply.thumb_up, Qt.LeftButton)
    qtbot.waitUntil(lambda: scalar(window, "SELECT rating FROM episodes WHERE id = ?", reply.episode_id) == 1,
                    timeout=10000)
    qtbot.mouseClick(reply.thumb_down, Qt.LeftButton)
    qtbot.waitUntil(lambda: scalar(window, "SELECT rating FROM episodes WHERE id = ?", reply.episode_id) == -1,
                    timeout=10000)
    assert reply.thumb_down.isChecked() and not reply.thumb_up.isChecked()


def test_stop_stops_the_reply_and_keeps_what_was_said(qtbot, tmp_path, tiny_engine, embedder):
    win = _window(qtbot, tmp_path, chat=tiny_engine, embedder=embedder, max_tokens=1000)
    panel = win.show_panel("chat")
    panel.turns.chunk.connect(lambda _text: panel.stop())  # Stop as soon as the first words arrive
    with qtbot.waitSignal(panel.turns.finished, timeout=TURN_MS) as finished:
        panel.send("Tell me a very long story")
    record, reason = finished.args
    assert reason == "cancelled"
    assert panel.send_button.text() == "Send" and "Stopped" in panel.replies()[-1].status.text()
    stored = row(win, "SELECT * FROM episodes WHERE id = ?", record.episode_id)
    assert stored is not None and tiny_engine.count_tokens(stored["assistant_text"]) < 100
    panel.shutdown()
    win.runner.shutdown(wait=True)
    win.services.close()


def test_incognito_writes_nothing(qtbot, window):
    on_db(window, add_memory, "User lives in Denver")
    panel = window.show_panel("chat")
    before = on_db(window, _counts)
    panel.incognito.setChecked(True)
    reply = _send_and_wait(qtbot, panel, "Where do I live?")
    assert reply.text and reply.episode_id is None and not reply.thumb_up.isEnabled()
    assert [c.memory_id for c in reply.chip_widgets()] == []  # incognito does not read memory either
    qtbot.wait(300)  # a learning step, if one were wrongly queued, would have started by now
    window.runner.submit("model", lambda: None).result(timeout=60)
    assert on_db(window, _counts) == before
    assert panel.session_id is None


def _fact(subject: str, relation: str, obj: str, statement: str) -> dict:
    return {"subject": subject, "relation": relation, "object": obj, "statement": statement, "confidence": 90,
            "kind": "semantic", "critical": False, "source": "user_said", "when": ""}


def test_a_turn_is_learned_and_the_graph_gains_nodes(qtbot, window):
    """Turns sent through the chat panel grow the memory graph live, without anyone calling refresh.

    The reply streams from the real tiny MLX model; extraction runs the real learning pipeline but with the scripted
    structured model from tests/fakes.py, because the random tiny model yields no deterministic facts. The window's
    look at the store's data_version is stopped, so only the turn (the window's memories_changed) can redraw it.
    """
    services = window.services
    services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": [_fact("user", "plays", "cello", "User plays the cello")]},
                          {"facts": [_fact("user", "owns", "bicycle", "User owns a red bicycle")]}],
         "usefulness_rating": [{"useful": []}],
         "reconcile_decision": [{"decision": "new", "target": 0, "reason": "a different fact"}]})
    on_db(window, add_memory, "User lives in Lisbon")
    chat = window.panels["chat"]
    graph = window.show_panel("graph")  # the user watches the graph while the reply streams
    qtbot.waitUntil(lambda: not graph._busy and len(graph.view.nodes) > 0, timeout=20000)
    window.store_watch.stop()
    before = len(graph.view.nodes)
    chunks, learned, failures, drawn = [], [], [], []
    chat.turns.chunk.connect(chunks.append)
    chat.learned.connect(learned.append)
    chat.turns.failed.connect(lambda message, _no_model: failures.append(message))
    graph.drawn.connect(drawn.append)
    chat.send("I play the cello every evening")
    qtbot.waitUntil(lambda: bool(learned or failures), timeout=TURN_MS)
    assert failures == [] and learned[0].errors == [] and chunks  # the reply streamed, then was learned from
    qtbot.waitUntil(lambda: bool(drawn) and drawn[-1] > before, timeout=20000)
    assert "User plays the cello" in {n.label for n in graph.view.nodes}
    assert "cello" in {n.label for n in graph.view.nodes if n.kind == "entity"}
    # a turn while the graph is hidden: it is redrawn as soon as it is shown again
    window.show_panel("chat")
    shown = len(graph.view.nodes)
    chat.send("My bicycle is red")
    qtbot.waitUntil(lambda: len(learned) == 2 or bool(failures), timeout=TURN_MS)
    assert failures == [] and learned[1].errors == []
    with qtbot.waitSignal(graph.drawn, timeout=20000) as redrawn:
        window.show_panel("graph")
    assert redrawn.args[0] > shown and "User owns a red bicycle" in {n.label for n in graph.view.nodes}


def test_veto_reanswers_without_the_memory(qtbot, window):
    for text in ("User's favourite tea is jasmine", "User drinks tea at 5 pm", "User's teapot is blue"):
        on_db(window, add_memory, text)
    panel = window.show_panel("chat")
    reply = _send_and_wait(qtbot, panel, "Make me a tea plan")
    before = [c.memory_id for c in reply.chip_widgets()]
    assert len(before) >= 2
    episodes = scalar(window, "SELECT count(*) FROM episodes")
    vetoed = before[0]
    edge_sql = "SELECT sum(weight) FROM edges WHERE kind = 'hebbian' AND ? IN (a_id, b_id)"
    qtbot.mouseClick(reply.thumb_up, Qt.LeftButton)  # a good answer: its memories' edges grow
    qtbot.waitUntil(lambda: (scalar(window, edge_sql, vetoed) or 0) > 0, timeout=10000)
    weight = scalar(window, edge_sql, vetoed)
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS):
        qtbot.mouseClick(reply.chip_widgets()[0].veto_button, Qt.LeftButton)
    after = [c.memory_id for c in reply.chip_widgets()]
    assert vetoed not in after and after
    assert scalar(window, "SELECT count(*) FROM episodes") == episodes  # the reply was rewritten, not added
    assert scalar(window, "SELECT vetoed_at FROM reply_memories WHERE episode_id = ? AND memory_id = ?",
                  reply.episode_id, vetoed) is not None
    assert scalar(window, edge_sql, vetoed) < weight  # its links to the reply's other memories weakened
    learnt = on_db(window, lambda db: recall_learning.load(db))
    assert (learnt.vetoes, learnt.rated_up) == (1, 1)  # and recall's blend learnt from the thumb and the veto


def test_memory_dial_off_recalls_nothing(qtbot, window):
    on_db(window, add_memory, "User's favourite tea is jasmine")
    panel = window.show_panel("chat")
    panel.dial.setCurrentText("off")
    reply = _send_and_wait(qtbot, panel, "Which tea do I like?")
    assert reply.chip_widgets() == [] and reply.episode_id is not None  # stored, but no memory was read


def test_chip_opens_the_memory_and_a_stored_conversation_reopens(qtbot, window):
    memory = on_db(window, add_memory, "User's cat is called Miso")
    panel = window.show_panel("chat")
    reply = _send_and_wait(qtbot, panel, "What is my cat called?")
    session = panel.session_id
    chip = next(c for c in reply.chip_widgets() if c.memory_id == memory)
    qtbot.mouseClick(chip.open_button, Qt.LeftButton)
    memories = window.panels["memories"]
    assert window.stack.currentWidget() is memories
    qtbot.waitUntil(lambda: memories.selected_ids() == [memory], timeout=20000)
    window.new_chat()
    assert not panel.message_widgets()
    panel.open_session(session)
    qtbot.waitUntil(lambda: len(panel.message_widgets()) == 2, timeout=20000)
    reopened = panel.replies()[0]
    assert reopened.text == reply.text and memory in [c.memory_id for c in reopened.chip_widgets()]
    assert reopened.thumb_up.isEnabled()


def test_replies_render_markdown_and_code(qtbot):
    from app.ui.chat_widgets import MessageWidget
    reply = MessageWidget("assistant", "A **bold** claim:\n\n```python\nprint('hi')\n```\n")
    qtbot.addWidget(reply)
    reply.resize(500, 300)
    html = reply.body.toHtml()
    assert "font-weight:700" in html  # **bold**
    assert "<pre" in html and "font-family:'monospace'" in html  # the fenced block, in a fixed-width font
    assert "print('hi')" in reply.body.toPlainText() and "```" not in reply.body.toPlainText()
    user = MessageWidget("user", "**not** markdown")
    qtbot.addWidget(user)
    assert user.body.toPlainText() == "**not** markdown"  # the user's own words are shown as typed


def test_quitting_mid_reply_stores_what_was_said(qtbot, tmp_path, tiny_engine, embedder):
    win = _window(qtbot, tmp_path, chat=tiny_engine, embedder=embedder, max_tokens=1000)
    panel = win.show_panel("chat")
    chunks = []
    panel.turns.chunk.connect(chunks.append)
    panel.send("Tell me everything about cellos")
    qtbot.waitUntil(lambda: bool(chunks), timeout=TURN_MS)
    path = win.services.db_path
    win.close()  # closeEvent: the panel stores the partial reply before the lanes and the store shut down
    db = open_db(path)
    try:
        stored = db.query("SELECT user_text, assistant_text, metadata FROM episodes")
    finally:
        db.close()
    assert [r["user_text"] for r in stored] == ["Tell me everything about cellos"]
    assert stored[0]["assistant_text"].startswith("".join(chunks)) and "cancelled" in stored[0]["metadata"]


# -- issue 14: what a person sees in the first hour ---------------------------------------------------------


class _TooLongForTheModel:
    """A chat model whose every reply fails before its first token, as an over-long context does."""

    def stream(self, messages, sampling, *, cancel=None):
        raise ModelError("The message and memory context need 9000 tokens but only 6992 fit in this model's "
                         "context window; shorten the message.")

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1


def test_a_reply_that_failed_before_its_first_word_says_there_is_no_reply(qtbot, tmp_path, embedder):
    win = _window(qtbot, tmp_path, chat=_TooLongForTheModel(), embedder=embedder)
    panel = win.show_panel("chat")
    with qtbot.waitSignal(panel.turns.idle, timeout=TURN_MS):
        panel.send("hello?")
    reply = panel.replies()[-1]
    assert reply.status.text()  # the reason, in plain words, stays under the reply
    assert reply.text == "_No reply._"  # not "…", which reads as still thinking
    win.panels["chat"].shutdown()
    win.runner.shutdown(wait=True)
    win.services.close()
