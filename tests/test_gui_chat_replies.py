"""The chat panel after a reply (issue 14): what a turn taught, queued messages, chips, the header, copy and
regenerate — offscreen, against a real store, the real MiniLM embedder and the real tiny MLX model."""
from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from core.config import Settings  # noqa: E402
from core.errors import ModelError  # noqa: E402
from core.store.memories import add_memory  # noqa: E402
from core.store.sessions import list_sessions  # noqa: E402
from tests.fakes import ScriptedStructuredModel  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402

from tests.test_gui_chat import TURN_MS, _fact, _window, scalar, window_fixture  # noqa: E402,F401 - the fixture

on_db = on_db_lane  # the store's connection belongs to the window's db lane


def _learning_script(*facts: dict) -> ScriptedStructuredModel:
    return ScriptedStructuredModel({"engram_facts": [{"facts": list(facts)}],
                                    "usefulness_rating": [{"useful": []}],
                                    "reconcile_decision": [{"decision": "new", "target": 0, "reason": "different"}]})


def _type_and_send(qtbot, panel, text: str) -> None:
    qtbot.mouseClick(panel.composer, Qt.LeftButton)
    qtbot.keyClicks(panel.composer, text)
    qtbot.keyClick(panel.composer, Qt.Key_Return)


def test_what_a_turn_taught_shows_under_the_reply_opens_and_undoes(qtbot, window):
    window.services.structured_model = lambda: _learning_script(
        _fact("user", "plays", "cello", "User plays the cello"))
    panel = window.show_panel("chat")
    with qtbot.waitSignal(panel.learned, timeout=TURN_MS):
        _type_and_send(qtbot, panel, "I play the cello every evening")
    reply = panel.replies()[-1]
    qtbot.waitUntil(lambda: bool(reply.learned_rows()), timeout=10000)
    [row] = reply.learned_rows()
    memory = scalar(window, "SELECT id FROM memories WHERE statement = 'User plays the cello'")
    assert row.memory_id == memory and row.open_button.text() == "You play the cello"
    assert row.caption.text() == "Remembered:" and row.isVisibleTo(reply)
    qtbot.mouseClick(row.open_button, Qt.LeftButton)  # opens it, as a chip does
    memories = window.panels["memories"]
    assert window.stack.currentWidget() is memories
    qtbot.waitUntil(lambda: memories.selected_ids() == [memory], timeout=20000)
    window.show_panel("chat")
    qtbot.mouseClick(row.undo_button, Qt.LeftButton)  # one click: to the trash, out of recall
    qtbot.waitUntil(lambda: scalar(window, "SELECT deleted_at FROM memories WHERE id = ?", memory) is not None,
                    timeout=10000)
    qtbot.waitUntil(lambda: row.undo_button.text() == "Restore", timeout=10000)
    assert row.caption.text() == "Not remembered:"
    qtbot.mouseClick(row.undo_button, Qt.LeftButton)  # changed their mind: back from the trash
    qtbot.waitUntil(lambda: scalar(window, "SELECT deleted_at FROM memories WHERE id = ?", memory) is None,
                    timeout=10000)
    qtbot.waitUntil(lambda: row.caption.text() == "Remembered:", timeout=10000)


def test_learning_that_fails_says_why_in_plain_words(qtbot, window):
    def too_long(_messages, _schema):
        raise ModelError("The message and memory context need 9000 tokens but only 6992 fit in this model's "
                         "context window; shorten the message.")
    window.services.structured_model = lambda: ScriptedStructuredModel({"engram_facts": too_long})
    panel = window.show_panel("chat")
    with qtbot.waitSignal(panel.learned, timeout=TURN_MS):
        _type_and_send(qtbot, panel, "The cello sounds lovely every evening")  # nothing plainly said of the user
    reply = panel.replies()[-1]
    qtbot.waitUntil(lambda: bool(reply.learned_note.text()), timeout=10000)
    note = reply.learned_note.text()
    assert note.startswith("Nothing was learned from this") and "too long" in note
    for jargon in ("Error", "tokens", "shorten", "engram", "context window", "Traceback"):
        assert jargon not in note
    assert reply.learned_rows() == []


def test_reflection_finished_in_the_background_leaves_a_quiet_note(qtbot, window):
    from core.store import jobs
    panel = window.show_panel("chat")
    qtbot.waitUntil(lambda: panel.job_notes.seen_until is not None, timeout=10000)

    def reflect_done(db):
        job = jobs.enqueue(db, "reflection", payload={"session_id": 1})
        jobs.claim(db, job.id, "test")
        jobs.heartbeat(db, job.id, progress=1.0, message="session 1: 2 new, 1 strengthened hypotheses")
        return jobs.finish(db, job.id, "done")
    on_db(window, reflect_done)
    qtbot.waitUntil(lambda: bool(panel.note.text()), timeout=15000)
    assert panel.note.text() == "Reflected on your last conversation: 2 new hypotheses, 1 strengthened."
    assert panel.note.isVisibleTo(panel)


def test_return_while_a_reply_streams_queues_the_message(qtbot, window):
    panel = window.show_panel("chat")
    finished = []
    panel.reply_finished.connect(finished.append)
    _type_and_send(qtbot, panel, "Tell me about tea")
    qtbot.waitUntil(lambda: panel.reply is not None and bool(panel.reply.text), timeout=TURN_MS)  # streaming
    assert panel.send_button.text() == "Stop"
    _type_and_send(qtbot, panel, "And about coffee")
    assert panel.composer.toPlainText() == ""  # taken, not silently ignored
    pending = panel.message_widgets()[-1]
    assert pending.role == "user" and pending.text == "And about coffee"
    assert "sends when this reply ends" in pending.pending_note.text() and pending.pending_note.isVisibleTo(pending)
    _type_and_send(qtbot, panel, "Never mind this one")
    dropped = panel.message_widgets()[-1]
    qtbot.mouseClick(dropped.cancel_button, Qt.LeftButton)  # a waiting message can be taken back
    assert dropped not in panel.message_widgets() and dropped not in panel.queued
    _type_and_send(qtbot, panel, "And about cocoa")
    qtbot.waitUntil(lambda: len(finished) == 3, timeout=TURN_MS)
    assert not pending.pending_note.isVisibleTo(pending) and not pending.cancel_button.isVisibleTo(pending)
    shown = panel.message_widgets()
    assert [m.role for m in shown] == ["user", "assistant"] * 3
    # each reply sits under the message it answers, not under the last one that was waiting
    assert [(m.text, r.request.text) for m, r in zip(shown[::2], shown[1::2])] == [
        ("Tell me about tea", "Tell me about tea"), ("And about coffee", "And about coffee"),
        ("And about cocoa", "And about cocoa")]
    stored = on_db(window, lambda db: [r["user_text"] for r in db.query("SELECT user_text FROM episodes "
                                                                        "ORDER BY id")])
    assert stored == ["Tell me about tea", "And about coffee", "And about cocoa"]


def test_a_memory_stored_twice_shows_one_chip(qtbot, window):
    for _ in range(2):  # as a doubled import left it
        on_db(window, add_memory, "User's cat is called Miso")
    panel = window.show_panel("chat")
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS) as finished:
        _type_and_send(qtbot, panel, "What is my cat called?")
    texts = [c.open_button.toolTip().split("\n")[0] for c in finished.args[0].chip_widgets()]
    assert texts.count("User's cat is called Miso") == 1


def test_chips_are_unique_by_memory_id(qtbot):
    from app.ui.chat_widgets import MessageWidget
    reply = MessageWidget("assistant", "ok")
    qtbot.addWidget(reply)
    used = [SimpleNamespace(id=3, text="User likes tea", why=""), SimpleNamespace(id=3, text="User likes tea", why=""),
            SimpleNamespace(id=4, text="User likes  tea", why=""),
            SimpleNamespace(id=5, text="User owns a cat", why="")]
    reply.set_used(used)
    assert [c.memory_id for c in reply.chip_widgets()] == [3, 5]


def test_a_failed_first_send_leaves_no_empty_conversation(qtbot, tmp_path):
    win = _window(qtbot, tmp_path)  # no chat model
    panel = win.show_panel("chat")
    with qtbot.waitSignal(panel.turns.idle, timeout=20000):
        _type_and_send(qtbot, panel, "hello?")
    qtbot.waitUntil(lambda: on_db(win, lambda db: list_sessions(db, include_deleted=True)) == [], timeout=10000)
    with qtbot.waitSignal(panel.sessions.loaded, timeout=10000):
        panel.sessions.reload()
    assert panel.sessions.list.count() == 0 and panel.session_id is None
    assert panel.title.text() == "New conversation" and "No chat model" in panel.replies()[-1].status.text()
    win.runner.shutdown(wait=True)


def test_chat_words_follow_the_platform(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    win = _window(qtbot, tmp_path)  # no chat model: the banner shows
    panel = win.show_panel("chat")
    qtbot.waitUntil(panel.banner.isVisible, timeout=20000)
    words = " ".join([panel.banner_text.text(), panel.sessions.empty.text(), panel.sessions.new_button.toolTip()])
    assert "this computer" in words and "this Mac" not in words
    assert "Ctrl+N" in words and "⌘" not in words
    win.runner.shutdown(wait=True)


def test_the_header_names_the_active_model_and_opens_models(qtbot, window, tiny_model_dir):
    panel = window.show_panel("chat")
    assert panel.model_button.text() == f"Model: {tiny_model_dir.name}"
    qtbot.mouseClick(panel.model_button, Qt.LeftButton)
    assert window.stack.currentWidget() is window.panels["models"]


def test_no_model_is_said_in_the_header(qtbot, tmp_path):
    win = _window(qtbot, tmp_path)
    panel = win.show_panel("chat")
    assert panel.model_button.text() == "No model"
    win.runner.shutdown(wait=True)


def test_copy_and_regenerate_the_last_reply(qtbot, window):
    from PySide6.QtGui import QGuiApplication
    panel = window.show_panel("chat")
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS) as first:
        _type_and_send(qtbot, panel, "Name a colour")
    reply = first.args[0]
    qtbot.mouseClick(reply.copy_button, Qt.LeftButton)
    assert QGuiApplication.clipboard().text() == reply.text and reply.text
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS) as second:
        _type_and_send(qtbot, panel, "Another one")
    latest = second.args[0]
    assert not reply.regenerate_button.isVisibleTo(reply) and latest.regenerate_button.isVisibleTo(latest)
    episodes = scalar(window, "SELECT count(*) FROM episodes")
    replaced = scalar(window, "SELECT assistant_text FROM episodes WHERE id = ?", latest.episode_id)
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS) as again:
        qtbot.mouseClick(latest.regenerate_button, Qt.LeftButton)
    assert again.args[0] is latest and latest.text
    assert scalar(window, "SELECT count(*) FROM episodes") == episodes  # rewritten in place, not added
    assert scalar(window, "SELECT assistant_text FROM episodes WHERE id = ?", latest.episode_id) == latest.text
    # the reply the user regenerated away is kept with the turn: the fine-tune learns the kept one over it
    metadata = json.loads(scalar(window, "SELECT metadata FROM episodes WHERE id = ?", latest.episode_id))
    assert metadata["rejected_replies"] == [replaced]
    assert [m.role for m in panel.message_widgets()] == ["user", "assistant", "user", "assistant"]


def test_replies_render_lists_and_tables(qtbot):
    from app.ui.chat_widgets import MessageWidget
    reply = MessageWidget("assistant", "Two things:\n\n- tea\n- cake\n\n| day | plan |\n|---|---|\n| Mon | cello |\n")
    qtbot.addWidget(reply)
    html = reply.body.toHtml()
    assert "<li" in html and "<table" in html and "cello" in reply.body.toPlainText()
    assert "|---|" not in reply.body.toPlainText()


def test_the_note_reads_what_the_real_forgetting_job_reports(db, clock, embedder):
    """The note is built from the job's own progress message: run the real handler so a changed wording shows."""
    from app.services.scheduling import forgetting_handler
    from app.ui.chat_learning import job_note
    from core.jobs import standard_specs
    from core.scheduler import Environment, Scheduler
    from tests.test_forget import old_store
    old_store(db, clock, embedder)
    services = SimpleNamespace(settings=Settings(), embedder=embedder)
    scheduler = Scheduler(db, standard_specs(forget=forgetting_handler(services, db)),
                          env=Environment(clock=db.clock, idle_seconds=lambda: 1e9, on_ac_power=lambda: True))
    job = scheduler.run_job(scheduler.enqueue("forgetting").id)
    assert job.state == "done"
    facts = db.scalar("SELECT count(*) FROM memories WHERE forgotten_at IS NOT NULL")
    turns = db.scalar("SELECT count(*) FROM episodes WHERE forgotten_at IS NOT NULL")
    assert facts and turns  # the old store has both kinds to let go of
    assert job_note(job) == (f"Let go of {facts} unused memor{'y' if facts == 1 else 'ies'} and summarised {turns} "
                             f"old turn{'' if turns == 1 else 's'}; you can restore them in Memories.")


@pytest.mark.parametrize("kind, message, note", [
    ("reflection", "conversation 3: 1 new hypothesis, 1 strengthened",
     "Reflected on your last conversation: 1 new hypothesis, 1 strengthened."),
    ("consolidation", "1 summary, 1 similarity edge, 0 made permanent",
     "Tidied your memories: 1 summary, 1 new link, 0 made permanent."),
    ("forgetting", "archived 1 fact, compacted 1 turn into 1 summary",
     "Let go of 1 unused memory and summarised 1 old turn; you can restore them in Memories."),
])
def test_the_note_reads_a_job_message_that_counts_one(kind, message, note):
    """The jobs say "1 fact", not "1 facts" (core.words): the note still reads them."""
    from app.ui.chat_learning import job_note
    assert job_note(SimpleNamespace(kind=kind, state="done", message=message)) == note


def test_a_fact_that_conflicts_with_a_pinned_memory_leads_to_the_question(qtbot, window):
    from core.store.memories import set_flag
    pinned = on_db(window, lambda db: add_memory(db, "User lives in Lisbon", subject="user", relation="lives_in",
                                                   object="Lisbon"))
    on_db(window, lambda db: set_flag(db, pinned, "pinned", True))
    window.services.structured_model = lambda: ScriptedStructuredModel({
        "engram_facts": [{"facts": [_fact("user", "lives in", "Porto", "User lives in Porto")]}],
        "usefulness_rating": [{"useful": []}],
        "reconcile_decision": [{"decision": "contradiction", "target": 1, "reason": "moved"}]})
    panel = window.show_panel("chat")
    with qtbot.waitSignal(panel.learned, timeout=TURN_MS):
        _type_and_send(qtbot, panel, "I moved to Porto last week")
    reply = panel.replies()[-1]
    qtbot.waitUntil(lambda: reply.question_button.isVisibleTo(reply), timeout=10000)
    assert reply.learned_rows() == [] and "pinned" in reply.learned_note.text()
    qtbot.mouseClick(reply.question_button, Qt.LeftButton)
    assert window.stack.currentWidget() is window.panels["hypotheses"]
