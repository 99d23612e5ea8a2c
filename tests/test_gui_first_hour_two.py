"""Issue 38, the first hour's second round: each defect a person met, clicked and typed through the window.

The reply streams from the real tiny MLX model; what a turn teaches comes from a scripted structured model that
can be held at any step (a slow machine's learning, made deterministic: the test releases it, never sleeps).
"""
from __future__ import annotations


import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QLabel  # noqa: E402

from tests.fakes import ScriptedStructuredModel  # noqa: E402
from tests.guikit import on_db_lane, type_and_send  # noqa: E402
from tests.held_learning import HeldLearning  # noqa: E402
from tests.test_gui_chat import TURN_MS, _fact, window_fixture  # noqa: E402,F401 - the fixture

def _type_and_send(qtbot, panel, text: str):
    return type_and_send(qtbot, panel, text, TURN_MS)


def _statement_count(window, statement: str) -> int:
    return on_db_lane(window, lambda db: db.scalar("SELECT count(*) FROM memories WHERE statement = ? "
                                                   "AND deleted_at IS NULL", (statement,)))


def test_learning_is_said_under_the_reply_and_each_fact_shows_the_moment_it_is_written(qtbot, window):
    held = HeldLearning([_fact("user", "plays", "piano", "User plays the piano"),
                         _fact("user", "plays", "cello", "User plays the cello in an orchestra")])
    window.services.structured_model = lambda: held.model
    panel = window.show_panel("chat")
    # two facts of one relation: the second's reconciliation asks the model (a related fact is stored by then)
    reply = _type_and_send(qtbot, panel, "I play the piano and I play the cello in an orchestra")
    qtbot.waitUntil(lambda: reply.learning_row.isVisibleTo(reply), timeout=10000)
    assert reply.learning_label.text() == "Learning from this…"
    assert reply.skip_learning_button.isVisibleTo(reply) and reply.skip_learning_button.text() == "Skip"
    assert not reply.question_button.isVisibleTo(reply) and not reply.retry_button.isVisibleTo(reply)  # nothing asked
    qtbot.waitUntil(held.extracting.is_set, timeout=TURN_MS)  # the event loop runs meanwhile
    held.extract_go.set()  # the first fact is written; the second waits on the model's comparison
    qtbot.waitUntil(lambda: [r.open_button.text() for r in reply.learned_rows()] == ["You play the piano"],
                    timeout=TURN_MS)
    assert reply.learning_row.isVisibleTo(reply)  # still learning: the second fact is not written yet
    assert _statement_count(window, "User plays the cello in an orchestra") == 0
    held.reconcile_go.set()
    qtbot.waitUntil(lambda: not reply.learning_row.isVisibleTo(reply), timeout=TURN_MS)
    assert [r.open_button.text() for r in reply.learned_rows()] == ["You play the piano",
                                                                     "You play the cello in an orchestra"]


def test_skip_under_the_reply_stops_learning_and_keeps_what_was_written(qtbot, window):
    from core.store import turn_learning
    held = HeldLearning([_fact("user", "plays", "piano", "User plays the piano"),
                         _fact("user", "plays", "cello", "User plays the cello in an orchestra")])
    window.services.structured_model = lambda: held.model
    panel = window.show_panel("chat")
    # two facts of one relation: the second's reconciliation asks the model (a related fact is stored by then)
    reply = _type_and_send(qtbot, panel, "I play the piano and I play the cello in an orchestra")
    held.extract_go.set()
    qtbot.waitUntil(lambda: bool(reply.learned_rows()), timeout=TURN_MS)
    qtbot.mouseClick(reply.skip_learning_button, Qt.LeftButton)
    held.reconcile_go.set()  # the model answers, but learning was asked to give way first
    qtbot.waitUntil(lambda: not reply.learning_row.isVisibleTo(reply), timeout=TURN_MS)
    assert [r.open_button.text() for r in reply.learned_rows()] == ["You play the piano"]
    assert reply.learned_note.text() == "Skipped: Engram learned nothing more from this."
    assert _statement_count(window, "User plays the cello in an orchestra") == 0
    state = on_db_lane(window, lambda db: db.scalar("SELECT json_extract(metadata, '$.learning') FROM episodes "
                                                    "WHERE id = ?", (reply.episode_id,)))
    assert state == turn_learning.SKIPPED  # no idle pass learns it later either
    assert panel.turns.learning is None and not panel.turns.to_learn


def _click_conversation(qtbot, panel, session_id: int) -> None:
    """A click on the conversation's row in the list."""
    row = next(i for i in range(panel.sessions.list.count())
               if panel.sessions.list.item(i).data(Qt.UserRole) == session_id)
    rect = panel.sessions.list.visualItemRect(panel.sessions.list.item(row))
    qtbot.mouseClick(panel.sessions.list.viewport(), Qt.LeftButton, pos=rect.center())


@pytest.fixture
def looping_window(qtbot, tmp_path, embedder):
    from tests.fakes import ScriptedChatModel
    from tests.test_gui_chat import _window
    chat = ScriptedChatModel(["Nice.", "No, not now. No, not now. No, not now."], finish="repetition")
    win = _window(qtbot, tmp_path, chat=chat, embedder=embedder)
    yield win
    win.panels["chat"].shutdown()
    win.runner.shutdown(wait=True)
    win.services.close()


def test_remembered_rows_their_undo_and_stopped_notes_stay_with_the_turn_when_reopened(qtbot, looping_window):
    window = looping_window
    cello = _fact("user", "plays", "cello", "User plays the cello")
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": lambda m, _s: {"facts": [cello] if "cello" in m[-1].content else []},
         "usefulness_rating": [{"useful": []}],
         "reconcile_decision": [{"decision": "new", "target": 0, "reason": "different"}]})
    panel = window.show_panel("chat")
    first = _type_and_send(qtbot, panel, "I play the cello every evening")
    qtbot.waitUntil(lambda: bool(first.learned_rows()) and not first.learning_row.isVisibleTo(first),
                    timeout=TURN_MS)
    second = _type_and_send(qtbot, panel, "Say no to me")
    assert second.status.text() == "Stopped: the model was repeating itself."
    qtbot.waitUntil(lambda: not second.learning_row.isVisibleTo(second), timeout=TURN_MS)
    [row] = first.learned_rows()
    qtbot.mouseClick(row.undo_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: row.undo_button.text() == "Restore", timeout=10000)
    session_id = panel.session_id

    qtbot.mouseClick(panel.sessions.new_button, Qt.LeftButton)  # another conversation, then back to this one
    qtbot.waitUntil(lambda: not panel.replies(), timeout=10000)
    _click_conversation(qtbot, panel, session_id)
    qtbot.waitUntil(lambda: len(panel.replies()) == 2, timeout=10000)
    first, second = panel.replies()
    [row] = first.learned_rows()
    assert row.open_button.text() == "You play the cello" and row.undo_button.text() == "Restore"
    assert row.isVisibleTo(first)
    assert second.status.text() == "Stopped: the model was repeating itself."
    assert not first.learning_row.isVisibleTo(first)
    qtbot.mouseClick(row.undo_button, Qt.LeftButton)  # Restore works from the reopened conversation too
    qtbot.waitUntil(lambda: row.undo_button.text() == "Undo", timeout=10000)
    assert _statement_count(window, "User plays the cello") == 1


def test_a_conversation_held_in_another_process_appears_in_the_list_by_itself(qtbot, window, window_db):
    from core.store.episodes import add_episode
    from core.store.sessions import create_session
    panel = window.show_panel("chat")
    qtbot.waitUntil(lambda: panel.sessions.list.count() == 0 and window.store_watch.version is not None,
                    timeout=10000)
    elsewhere = create_session(window_db, "Held in engram chat")  # `engram chat` in a terminal beside the app
    add_episode(window_db, "Hello from the terminal", "Hi!", session_id=elsewhere, metadata={"learning": "done"})
    qtbot.waitUntil(lambda: [panel.sessions.list.item(i).text() for i in range(panel.sessions.list.count())]
                    == ["Held in engram chat"], timeout=20000)


def test_a_turn_a_closed_process_was_learning_is_taken_over_at_once(qtbot, window, window_db):
    import socket
    import subprocess
    import sys
    from core.store import turn_learning
    from core.store.episodes import add_episode
    from core.store.sessions import create_session
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": [_fact("user", "plays", "cello", "User plays the cello")]}],
         "usefulness_rating": [{"useful": []}], "reconcile_decision": [{"decision": "new", "target": 0,
                                                                          "reason": "new"}]})
    window.show_panel("chat")
    qtbot.waitUntil(lambda: window.store_watch.version is not None, timeout=10000)
    session = create_session(window_db, "Held in engram chat")
    episode = add_episode(window_db, "I play the cello every evening", "Lovely.", session_id=session,
                          metadata={"learning": "pending"})
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert turn_learning.claim(window_db, episode, f"{socket.gethostname()}:{int(gone.stdout)}:0") is not None
    qtbot.waitUntil(lambda: window_db.scalar("SELECT json_extract(metadata, '$.learning') FROM episodes "
                                             "WHERE id = ?", (episode,)) == "done", timeout=TURN_MS)
    assert window_db.scalar("SELECT count(*) FROM memories WHERE statement = 'User plays the cello'") == 1


def _user_active(db, activity, gate):
    from core.scheduler import Environment
    return Environment(clock=db.clock, idle_seconds=lambda: 0.0, on_ac_power=lambda: True, model_gate=gate)


def test_run_now_while_the_chat_learns_says_so_and_the_reflection_starts_at_once(qtbot, window, window_db):
    """The chat's learning hands the model over to a reflection the user starts; the reflection learns that turn
    first, and the reply's rows still come. Reflect now in Hypotheses is the same Run now."""
    from PySide6.QtWidgets import QApplication

    from app.ui.background_jobs import BackgroundJobs
    from core.store import jobs as store
    held = HeldLearning([_fact("user", "plays", "cello", "User plays the cello")])
    window.services.structured_model = lambda: held.model
    window.background = BackgroundJobs(window.services, poll_seconds=0.1, environment=_user_active).start(
        QApplication.instance())
    panel = window.show_panel("chat")
    reply = _type_and_send(qtbot, panel, "I play the cello every evening")
    qtbot.waitUntil(held.extracting.is_set, timeout=TURN_MS)  # the chat is learning from it, slowly
    hypotheses = window.show_panel("hypotheses")
    qtbot.mouseClick(hypotheses.reflect_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: hypotheses.message.text().startswith("Reflection starts in a moment: Engram is "
                                                                 "learning from your last message"), timeout=10000)
    held.extract_go.set()  # its next step: the chat's learning gives way, the reflection takes the model
    qtbot.waitUntil(lambda: store.last_finished(window_db, "reflection") is not None, timeout=TURN_MS)
    assert store.last_finished(window_db, "reflection").state == "done"
    qtbot.waitUntil(lambda: hypotheses.message.text().startswith("Reflection finished"), timeout=20000)
    qtbot.waitUntil(lambda: [r.open_button.text() for r in reply.learned_rows()] == ["You play the cello"],
                    timeout=TURN_MS)  # learned by the reflection, shown under the reply all the same
    qtbot.waitUntil(lambda: not reply.learning_row.isVisibleTo(reply), timeout=TURN_MS)
    assert window_db.scalar("SELECT count(*) FROM memories WHERE statement = 'User plays the cello'") == 1
    window.background.stop()


def test_a_memory_link_under_a_reply_opens_its_memory_whatever_filter_memories_had(qtbot, window):
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": [_fact("user", "plays", "cello", "User plays the cello")]}],
         "usefulness_rating": [{"useful": []}], "reconcile_decision": [{"decision": "new", "target": 0,
                                                                          "reason": "new"}]})
    memories = window.show_panel("memories")
    memories.set_view("full", remember=False)
    memories.status.setCurrentText("trashed")  # where the person left Memories last time
    panel = window.show_panel("chat")
    reply = _type_and_send(qtbot, panel, "I play the cello every evening")
    qtbot.waitUntil(lambda: bool(reply.learned_rows()), timeout=TURN_MS)
    [row] = reply.learned_rows()
    qtbot.mouseClick(row.open_button, Qt.LeftButton)
    assert window.stack.currentWidget() is memories
    qtbot.waitUntil(lambda: memories.selected_ids() == [row.memory_id], timeout=20000)
    assert memories.status.currentText() == "active"
    qtbot.waitUntil(lambda: "User plays the cello" in memories.detail.toPlainText(), timeout=20000)


def test_a_huge_paste_is_refused_in_the_composer_before_anything_is_posted(qtbot, window):
    from PySide6.QtWidgets import QApplication
    panel = window.show_panel("chat")
    pasted = ("A long log line that someone copied from a terminal. " * 4500)[:231_348]
    QApplication.clipboard().setText(pasted)
    qtbot.mouseClick(panel.composer, Qt.LeftButton)
    qtbot.keyClick(panel.composer, Qt.Key_V, Qt.ControlModifier)
    assert len(panel.composer.toPlainText()) == 231_348
    qtbot.keyClick(panel.composer, Qt.Key_Return)
    assert panel.message_widgets() == [] and not panel.turns.busy  # nothing posted, no conversation begun
    assert panel.composer.toPlainText() == pasted  # the text is kept
    assert panel.composer_note.isVisibleTo(panel)
    assert panel.composer_note.text().startswith(
        "Too long to send: 231,348 characters, and a message can hold 200,000.")
    qtbot.keyClick(panel.composer, Qt.Key_Backspace)  # the person starts shortening it: the note goes
    assert not panel.composer_note.isVisibleTo(panel)


@pytest.fixture
def scripted_window(qtbot, tmp_path, embedder):
    from tests.fakes import ScriptedChatModel
    from tests.test_gui_chat import _window
    chat = ScriptedChatModel([("Eu, não, e não! " * 10).strip(), "Lina, no!"], finish="stop")  # the model ended
    win = _window(qtbot, tmp_path, chat=chat, embedder=embedder)
    win.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": []}]})
    yield win
    win.panels["chat"].shutdown()
    win.runner.shutdown(wait=True)
    win.services.close()


def test_the_loop_guard_stops_a_loop_the_model_ended_itself_and_never_a_short_reply(qtbot, scripted_window):
    panel = scripted_window.show_panel("chat")
    looping = _type_and_send(qtbot, panel, "Say no in Portuguese")
    assert looping.status.text() == "Stopped: the model was repeating itself."
    assert looping.text == "Eu, não, e não!"  # said once, as a loop the guard stopped is
    short = _type_and_send(qtbot, panel, "Say no to Lina")
    assert short.text == "Lina, no!" and short.status.text() == ""
    stored = on_db_lane(scripted_window, lambda db: [r[0] for r in db.execute(
        "SELECT json_extract(metadata, '$.finish_reason') FROM episodes ORDER BY id")])
    assert stored == ["repetition", "stop"]


def _captions(reply) -> list[str]:
    """The chips row's captions, left to right."""
    widgets = (reply.chips.itemAt(i).widget() for i in range(reply.chips.count()))
    return [w.text() for w in widgets if isinstance(w, QLabel)]


def test_labels_tell_the_truth_about_recalled_critical_and_unrated_memories(qtbot, scripted_window, window_db):
    """Chips are "Recalled" while the reply is written and after (those it drew on first); a memory recalled but
    not drawn on says so in Last used; a critical fact's importance is "critical", a new one's "not rated yet"."""
    from core.memory.index import index_memories
    from core.store.memories import add_memory
    window = scripted_window
    peanuts = add_memory(window_db, "The user is allergic to peanuts.", subject="user", relation="allergic_to",
                         object="peanuts", critical=True)
    cello = add_memory(window_db, "The user plays the cello.", subject="user", relation="plays", object="cello")
    index_memories(window_db, window.services.embedder, [peanuts, cello])
    panel = window.show_panel("chat")
    captions = []
    panel.turns.prepared.connect(lambda _p: captions.append(_captions(panel.reply)))
    reply = _type_and_send(qtbot, panel, "Can I eat peanut butter? I play the cello tonight.")
    assert captions and captions[0] == ["Recalled:"]  # while it is written
    after = _captions(reply)
    assert after and set(after) <= {"Drew on:", "Also recalled:"}
    recalled = {c.memory_id for c in reply.chip_widgets()}
    assert peanuts in recalled
    memories = window.show_panel("memories")
    memories.set_view("full", remember=False)
    qtbot.waitUntil(lambda: peanuts in [m.id for m in memories.model.memories], timeout=20000)
    qtbot.waitUntil(lambda: peanuts in memories.model.recalled, timeout=20000)
    model = memories.model
    row = next(i for i, m in enumerate(model.memories) if m.id == peanuts)
    assert model.index(row, 4).data() == "critical"
    assert model.index(row, 5).data().startswith("recalled ") and model.index(row, 5).data().endswith(
        ", not drawn on")  # the scripted reply quoted none of it
    other = next(i for i, m in enumerate(model.memories) if m.id == cello)
    assert model.index(other, 4).data() == "not rated yet"


def test_an_edit_reaches_the_fact_and_about_you_says_what_holds_now(qtbot, window, window_db, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    from core.store.memories import add_memory
    lina = add_memory(window_db, "The user is Lina.", subject="user", relation="name", object="Lina")
    porto = add_memory(window_db, "The user moved to Porto.", subject="user", relation="lives_in", object="Porto")
    memories = window.show_panel("memories")
    memories.set_view("simple", remember=False)  # About you
    qtbot.waitUntil(lambda: porto in memories.simple.rows, timeout=20000)
    assert memories.simple.rows[porto].sentence.text() == "You live in Porto."  # the state, not the event
    memories.set_view("full", remember=False)
    qtbot.waitUntil(lambda: memories.select_memory(lina), timeout=20000)
    monkeypatch.setattr(QInputDialog, "getMultiLineText",
                        staticmethod(lambda *a, **k: ("The user's name is Lina Costa.", True)))
    qtbot.mouseClick(memories.buttons["edit"], Qt.LeftButton)
    qtbot.waitUntil(lambda: window_db.query_one("SELECT statement FROM memories WHERE id = ?", (lina,))["statement"]
                    == "The user's name is Lina Costa.", timeout=20000)
    row = window_db.query_one("SELECT subject, relation, object FROM memories WHERE id = ?", (lina,))
    assert (row["subject"], row["relation"], row["object"]) == ("user", "name", "Lina Costa")


def test_pin_and_protect_keep_the_selection_and_a_protected_fact_says_why_it_cannot_be_deleted(qtbot, window,
                                                                                                  window_db):
    from core.store.memories import add_memory
    peanuts = add_memory(window_db, "The user is allergic to peanuts.", critical=True)
    memories = window.show_panel("memories")
    memories.set_view("full", remember=False)
    qtbot.waitUntil(lambda: memories.select_memory(peanuts), timeout=20000)
    qtbot.mouseClick(memories.buttons["pin"], Qt.LeftButton)
    qtbot.waitUntil(lambda: memories.model.memories and memories.model.memories[0].pinned, timeout=20000)
    assert memories.selected_ids() == [peanuts] and memories.buttons["unpin"].isEnabled()
    qtbot.mouseClick(memories.buttons["protect"], Qt.LeftButton)
    qtbot.waitUntil(lambda: memories.model.memories and memories.model.memories[0].protected, timeout=20000)
    assert memories.selected_ids() == [peanuts] and memories.buttons["unprotect"].isEnabled()
    assert "allergic to peanuts" in memories.detail.toPlainText() or qtbot.waitUntil(
        lambda: "allergic to peanuts" in memories.detail.toPlainText(), timeout=10000) is None
    memories.set_view("simple", remember=False)
    qtbot.waitUntil(lambda: peanuts in memories.simple.rows and memories.simple.rows[peanuts].memory.protected,
                    timeout=20000)
    row = memories.simple.rows[peanuts]
    assert not row.delete.isEnabled() and "unprotect it in All details to delete it" in row.state.text()


def test_the_welcome_screen_recommends_by_speed_and_says_the_pace(qtbot, tmp_path, monkeypatch):
    from app.services.wiring import Services
    from app.ui.main_window import MainWindow
    monkeypatch.setattr("models.speed.machine_key", lambda: "Linux x86_64 2 cpus, mlx on Device(cpu, 0)")
    monkeypatch.setattr("models.speed.probe_bandwidth", lambda: 1.9e9)  # two loaded cores
    monkeypatch.setattr("models.budget.memory_budget", lambda *a, **k: __import__("models.budget").budget
                        .MemoryBudget(16 * 1024 ** 3, "available"))
    win = MainWindow(Services.from_data_dir(tmp_path / "home"))
    qtbot.addWidget(win)
    welcome = win.show_onboarding()
    qtbot.waitUntil(lambda: "Recommended for" in welcome.model.text(), timeout=60000)
    text = welcome.model.text()
    assert "Qwen3-0.6B-4bit" in text and "Qwen3-8B" not in text
    assert "Here it writes about 0.5 tokens a second: slow on" in text
    welcome.close()
    win.runner.shutdown(wait=True)


def test_each_reply_says_its_pace_quietly_as_lm_studio_does(qtbot, window):
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": []}]})
    panel = window.show_panel("chat")
    reply = _type_and_send(qtbot, panel, "Hello there")  # the real tiny model
    import re
    assert re.fullmatch(r"\d+\.\d\d s to first token · \d+\.\d tok/s · \d+ tokens", reply.pace.text()), \
        reply.pace.text()
    assert reply.pace.isVisibleTo(reply)


def test_a_model_folder_dropped_on_the_window_is_added(qtbot, tmp_path, tiny_model_dir):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent
    from PySide6.QtWidgets import QApplication

    from app.services.wiring import Services
    from app.ui.main_window import MainWindow
    win = MainWindow(Services.from_data_dir(tmp_path / "home"))
    qtbot.addWidget(win)
    win.show()
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(tiny_model_dir))])
    where = win.rect().center()
    enter = QDragEnterEvent(where, Qt.CopyAction, data, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(win, enter)
    assert enter.isAccepted()
    models = win.panel("models")
    with qtbot.waitSignal(models.added, timeout=60000) as added:
        QApplication.sendEvent(win, QDropEvent(QPointF(where), Qt.CopyAction, data, Qt.LeftButton, Qt.NoModifier))
    assert added.args == [True], models.message.text()
    assert win.stack.currentWidget() is models
    assert win.services.settings.chat_model == str(tiny_model_dir.resolve())  # the first model: chatted with
    text = QMimeData()
    text.setText("just words")
    refused = QDragEnterEvent(where, Qt.CopyAction, text, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(win, refused)
    assert not refused.isAccepted()  # only models are taken
    win.runner.shutdown(wait=True)


def test_a_code_block_in_a_reply_is_copied_with_one_click(qtbot, tmp_path, embedder):
    from PySide6.QtGui import QGuiApplication

    from tests.fakes import ScriptedChatModel
    from tests.test_gui_chat import _window
    chat = ScriptedChatModel(["Here it is:\n\n```python\nfor bar in range(4):\n    print(bar)\n```\n\nPlay it slowly."])
    window = _window(qtbot, tmp_path, chat=chat, embedder=embedder)
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": []}]})
    panel = window.show_panel("chat")
    reply = _type_and_send(qtbot, panel, "Give me a counting exercise in code")
    QGuiApplication.clipboard().setText("")
    found = reply.body.document().find("Copy code")
    assert not found.isNull()
    found.setPosition(found.selectionStart() + 2)  # inside the link's words
    qtbot.mouseClick(reply.body.viewport(), Qt.LeftButton, pos=reply.body.cursorRect(found).center())
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text() == "for bar in range(4):\n    print(bar)",
                    timeout=5000)
    panel.shutdown()
    window.runner.shutdown(wait=True)
    window.services.close()


def test_a_conversation_has_its_own_instructions_and_the_model_is_given_them(qtbot, tmp_path, embedder):
    from core.store.sessions import get_session
    from tests.fakes import ScriptedChatModel
    from tests.test_gui_chat import _window
    chat = ScriptedChatModel(["Olá!", "Claro."])
    window = _window(qtbot, tmp_path, chat=chat, embedder=embedder)
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": []}]})
    panel = window.show_panel("chat")
    panel.ask_instructions = lambda current: ("Answer in Portuguese.", True)  # typed in the dialog
    qtbot.mouseClick(panel.header.instructions_button, Qt.LeftButton)
    assert panel.header.instructions_button.text() == "Instructions ✓"
    _type_and_send(qtbot, panel, "Hello")
    system = chat.calls[-1][0]
    assert system.role == "system" and "The user's instructions for this conversation:\nAnswer in Portuguese." \
        in system.content
    session = on_db_lane(window, lambda db: get_session(db, panel.session_id))
    assert session.instructions == "Answer in Portuguese."
    qtbot.mouseClick(panel.sessions.new_button, Qt.LeftButton)  # a new conversation starts without them
    assert panel.header.instructions_button.text() == "Instructions…"
    _type_and_send(qtbot, panel, "Hi again")
    assert "Answer in Portuguese." not in chat.calls[-1][0].content
    panel.shutdown()
    window.runner.shutdown(wait=True)
    window.services.close()


def test_regenerate_keeps_the_earlier_answer_one_click_away_and_after_a_reopen(qtbot, tmp_path, embedder):
    from tests.fakes import ScriptedChatModel
    from tests.test_gui_chat import _window
    chat = ScriptedChatModel(["First answer.", "Second answer."])
    window = _window(qtbot, tmp_path, chat=chat, embedder=embedder)
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": []}], "usefulness_rating": [{"useful": []}]})
    panel = window.show_panel("chat")
    reply = _type_and_send(qtbot, panel, "Suggest a piece")
    assert not reply.older_button.isVisibleTo(reply)  # one answer: nothing to step through
    with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS):
        qtbot.mouseClick(reply.regenerate_button, Qt.LeftButton)
    assert reply.text == "Second answer." and reply.answer_count.text() == "2/2"
    qtbot.mouseClick(reply.older_button, Qt.LeftButton)
    assert reply.body.toPlainText().strip() == "First answer." and reply.answer_count.text() == "1/2"
    qtbot.mouseClick(reply.newer_button, Qt.LeftButton)
    assert reply.body.toPlainText().strip() == "Second answer."
    session_id = panel.session_id
    qtbot.mouseClick(panel.sessions.new_button, Qt.LeftButton)
    _click_conversation(qtbot, panel, session_id)
    qtbot.waitUntil(lambda: len(panel.replies()) == 1, timeout=10000)
    reopened = panel.replies()[0]
    assert reopened.answer_count.text() == "2/2"
    qtbot.mouseClick(reopened.older_button, Qt.LeftButton)
    assert reopened.body.toPlainText().strip() == "First answer."
    panel.shutdown()
    window.runner.shutdown(wait=True)
    window.services.close()


def test_a_memory_revealed_is_selected_even_when_a_refresh_asked_meanwhile_ends_first(qtbot, window):
    """A refresh asked (with the old filter) while a reveal looked the memory's state up ended after the reveal had
    changed the filters: it took the reveal, found no such row among the trashed ones and selected nothing, and the
    reveal's own load had nothing left to select (seen as a test that timed out on a busy machine)."""
    from core.store.memories import add_memory
    memory_id = on_db_lane(window, add_memory, "User plays the cello")
    memories = window.show_panel("memories")
    memories.set_view("full", remember=False)
    memories.status.setCurrentText("trashed")  # where the person left Memories last time
    qtbot.waitUntil(lambda: not memories.model.memories, timeout=20000)  # the trashed ones are listed: none
    memories.reveal_memory(memory_id)  # looks up its state on the db lane, then changes the filters and reloads
    memories.reload()  # a commit elsewhere: read again, with the filters as they still are
    qtbot.waitUntil(lambda: memories.selected_ids() == [memory_id], timeout=20000)
    assert memories.status.currentText() == "active"
