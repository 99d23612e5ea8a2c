"""The menu bar a desktop app has: File, Edit, View, Window, Help; Ctrl/⌘+Q quits; About names the version."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QKeySequence  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from app.ui.settings_panel import package_versions  # noqa: E402


def _menu(window, title):
    menus = {action.text().replace("&", ""): action.menu() for action in window.menuBar().actions()}
    return menus[title]


def _labels(menu):
    return [action.text().replace("&", "") for action in menu.actions() if not action.isSeparator()]


def _press(qtbot, window, sequence):
    combination = QKeySequence(sequence)[0]
    qtbot.keyClick(window.focusWidget() or window, combination.key(), combination.keyboardModifiers())


def test_the_menu_bar_has_the_usual_menus_and_items(window):
    titles = [action.text().replace("&", "") for action in window.menuBar().actions()]
    assert titles == ["File", "Edit", "View", "Window", "Help"]
    assert {"New Chat", "Import Memories…", "Export Memories…", "Quit Engram"} <= set(_labels(_menu(window, "File")))
    assert {"Undo", "Redo", "Cut", "Copy", "Paste", "Select All", "Find"} <= set(_labels(_menu(window, "Edit")))
    assert {"Chat", "Memories", "Models", "Settings"} <= set(_labels(_menu(window, "View")))
    assert {"Minimize", "Zoom"} <= set(_labels(_menu(window, "Window")))
    assert "About Engram" in _labels(_menu(window, "Help"))


def test_view_menu_opens_a_panel(qtbot, window):
    memories = next(a for a in _menu(window, "View").actions() if a.text().replace("&", "") == "Memories")
    memories.trigger()
    assert window.stack.currentWidget() is window.panels["memories"] and memories.isChecked()


def test_about_names_the_version(qtbot, window):
    about = next(a for a in _menu(window, "Help").actions() if a.text().replace("&", "") == "About Engram")
    about.trigger()
    box = window.findChild(QMessageBox)
    assert box is not None and box.isVisible() and package_versions()["engram"] in box.text()
    assert box.textFormat() == Qt.RichText  # our own markup, rendered (data in labels is shown plain)
    box.close()


def test_the_quit_key_closes_the_window_and_the_store(qtbot, window):
    quits = []
    window.exit_application = lambda: quits.append(True)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    _ = window.services.db  # the store is open
    quit_keys = QKeySequence.keyBindings(QKeySequence.Quit) or [QKeySequence("Ctrl+Q")]
    _press(qtbot, window, quit_keys[0])
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=10000)
    assert quits == [True] and window.services._db is None
