"""The main window, the task runner and the settings panel, offscreen."""
from __future__ import annotations

import shutil
import sys
import threading
from importlib import metadata

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtGui import QKeySequence  # noqa: E402
from PySide6.QtWidgets import QLabel  # noqa: E402

from app.ui.tasks import TaskRunner  # noqa: E402
from app.ui.main_window import available_panels  # noqa: E402
from app.ui.settings_panel import package_versions  # noqa: E402
from core.config import load_settings  # noqa: E402


def test_results_come_back_on_the_gui_thread(qtbot):
    runner = TaskRunner()
    seen = {}

    def work():
        seen["worker"] = threading.current_thread().name
        return 41 + 1

    def done(value):
        seen["value"] = value
        seen["gui"] = threading.current_thread() is threading.main_thread()

    runner.submit("db", work, on_done=done)
    qtbot.waitUntil(lambda: "value" in seen, timeout=5000)
    assert seen == {"worker": seen["worker"], "value": 42, "gui": True}
    assert seen["worker"].startswith("engram-db")
    runner.shutdown()


def test_errors_reach_the_gui_not_a_silent_thread(qtbot):
    runner = TaskRunner()
    caught = []
    runner.submit("db", lambda: 1 / 0, on_error=caught.append)
    qtbot.waitUntil(lambda: bool(caught), timeout=5000)
    assert isinstance(caught[0], ZeroDivisionError)
    assert "ZeroDivisionError" in runner.errors[-1]
    runner.shutdown()


def test_a_failed_calls_open_cursor_is_closed_on_its_own_lane(qtbot, db):
    """A cursor left open by a failing call must not travel with the exception to the GUI thread: finalizing it
    there while the lane holds the connection would deadlock (apsw takes the connection mutex under the GIL)."""
    runner = TaskRunner()
    closed_on, caught = [], []
    db.execute("CREATE TABLE numbers(n)")
    db.conn.executemany("INSERT INTO numbers VALUES (?)", [(i,) for i in range(10)])

    class Marker:  # lives beside the cursor in the failing frame; tells which thread drops it
        def __del__(self):
            closed_on.append(threading.current_thread().name)

    def fail_mid_read():
        marker, rows = Marker(), db.execute("SELECT n FROM numbers")
        next(rows)  # the statement is still open
        raise ValueError(f"failed reading with {marker} and {rows}")

    runner.submit("db", fail_mid_read, on_error=caught.append)
    qtbot.waitUntil(lambda: bool(caught) and bool(closed_on), timeout=5000)
    assert closed_on[0].startswith("engram-db")
    assert caught[0].__traceback__ is not None  # still says where it failed
    runner.shutdown()


def test_streamed_items_arrive_in_order(qtbot):
    runner = TaskRunner()
    items, finished = [], []
    runner.stream("model", lambda: iter(range(5)), on_item=items.append, on_done=lambda: finished.append(1))
    qtbot.waitUntil(lambda: bool(finished), timeout=5000)
    assert items == [0, 1, 2, 3, 4]
    runner.shutdown()


def test_window_lists_the_panels_of_this_build(window):
    titles = [window.sidebar.item(i).text() for i in range(window.sidebar.count())]
    assert titles == [spec.title for spec in available_panels()]
    assert "Settings" in titles


def test_settings_panel_saves_to_the_data_folder(qtbot, window):
    panel = window.show_panel("settings")
    panel.dial.setCurrentText("eager")
    panel.idle_minutes.setValue(25)
    with qtbot.waitSignal(panel.saved, timeout=10000) as saved_signal:
        panel.save()
    assert saved_signal.args == [True]
    saved = load_settings(window.services.data_dir)
    assert saved.memory_dial == "eager"
    assert saved.scheduler.idle_minutes == 25
    assert window.services.settings.memory_dial == "eager"


def test_settings_show_the_data_folder_in_the_file_browser(window):
    panel = window.show_panel("settings")
    opened = []
    panel.open_url = opened.append
    assert panel.data_dir.text() == str(window.services.data_dir)
    panel.show_folder_button.click()
    assert [url.toLocalFile() for url in opened] == [str(window.services.data_dir)]


def test_preferences_shortcut_opens_settings(window, qtbot):
    window.open_settings()
    assert window.stack.currentWidget() is window.panels["settings"]


def _press(qtbot, window, sequence: QKeySequence) -> None:
    """Types the platform's key combination for `sequence` (⌘ on the Mac, Ctrl elsewhere) into the window."""
    combination = QKeySequence(sequence)[0]
    qtbot.keyClick(window.focusWidget() or window, combination.key(), combination.keyboardModifiers())


def test_keyboard_shortcuts_new_chat_search_and_settings(qtbot, window):
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    _press(qtbot, window, QKeySequence(QKeySequence.Preferences) if sys.platform == "darwin"
           else QKeySequence("Ctrl+,"))
    assert window.stack.currentWidget() is window.panels["settings"]
    _press(qtbot, window, QKeySequence(QKeySequence.New))  # ⌘N: a fresh conversation, from any panel
    chat = window.panels["chat"]
    assert window.stack.currentWidget() is chat and chat.session_id is None
    qtbot.waitUntil(chat.composer.hasFocus, timeout=5000)
    _press(qtbot, window, QKeySequence(QKeySequence.Find))  # ⌘F: the current panel's search field
    qtbot.waitUntil(chat.sessions.search.hasFocus, timeout=5000)
    memories = window.show_panel("memories")
    _press(qtbot, window, QKeySequence(QKeySequence.Find))
    qtbot.waitUntil(memories.search.hasFocus, timeout=5000)


def test_settings_refuse_a_model_that_is_not_here_and_change_nothing(qtbot, window, tiny_model_dir):
    panel = window.show_panel("settings")
    before = window.services.settings
    panel.chat_model.setCurrentText("no-such-org/no-such-model")
    panel.dial.setCurrentText("light")
    with qtbot.waitSignal(panel.saved, timeout=10000) as saved:
        panel.save()
    assert saved.args == [False] and "Not saved" in panel.saved_label.text()
    assert "in Models" in panel.saved_label.text() and "engram models" not in panel.saved_label.text()
    assert window.services.settings == before and load_settings(window.services.data_dir) == before
    panel.embedder.setText(str(window.services.data_dir / "missing-embedder"))
    panel.chat_model.setCurrentText(str(tiny_model_dir))  # a local MLX model folder is fine
    with qtbot.waitSignal(panel.saved, timeout=60000) as saved:
        panel.save()
    assert saved.args == [False] and "embedding model" in panel.saved_label.text()
    panel.embedder.setText(before.embedder)
    with qtbot.waitSignal(panel.saved, timeout=10000) as saved:
        panel.save()
    assert saved.args == [True] and load_settings(window.services.data_dir).chat_model == str(tiny_model_dir)


def test_settings_offer_installed_models_and_show_versions(qtbot, window, tiny_model_dir, tmp_path):
    shutil.copytree(tiny_model_dir, tmp_path / "tiny")
    window.services.models_dir.mkdir(parents=True)
    window.services.model_store().install(tmp_path / "tiny", repo_id="tiny-org/tiny-4bit")
    panel = window.show_panel("settings")
    offered = lambda: [panel.chat_model.itemText(i) for i in range(panel.chat_model.count())]  # noqa: E731
    qtbot.waitUntil(lambda: offered() == ["tiny-org/tiny-4bit"], timeout=10000)
    about = {label.text() for label in panel.findChildren(QLabel)}
    assert {"mlx", "apsw", "sqlite-vec", "PySide6-Essentials", "Python"} <= about
    assert metadata.version("apsw") in about and metadata.version("mlx") in about
    engram = package_versions()["engram"]
    assert engram[0].isdigit() and engram in about  # installed, or this checkout's pyproject version
