"""One source of truth for settings: the app follows settings.json when another process (engram models use)
changes it, and Settings → Save writes only what the user changed in the panel, merged into the file on disk."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.cli.main import run_cli  # noqa: E402
from core.config import SETTINGS_FILENAME, load_settings  # noqa: E402


def _choose_in_combo(qtbot, combo, text: str) -> None:
    """Pick an entry as a user does: focus the combo box and type the start of the entry."""
    combo.setFocus()
    index = combo.findText(text)
    assert index >= 0, text
    while combo.currentIndex() != index:
        qtbot.keyClick(combo, Qt.Key_Down if combo.currentIndex() < index else Qt.Key_Up)


def test_a_cli_model_choice_reaches_the_open_app_and_survives_save(qtbot, window, tiny_model_dir, capsys):
    settings_panel = window.show_panel("settings")
    models_panel = window.show_panel("models")
    qtbot.waitUntil(lambda: models_panel.table.rowCount() > 0, timeout=10000)
    folder = str(tiny_model_dir.resolve())
    # another process chooses the model while the app is open
    assert run_cli(["--data-dir", str(window.services.data_dir), "models", "use", folder]) == 0
    qtbot.waitUntil(lambda: window.services.settings.chat_model == folder, timeout=10000)
    qtbot.waitUntil(lambda: settings_panel.chat_model.currentText() == folder, timeout=10000)
    # the Models panel marks it active
    qtbot.waitUntil(lambda: any(models_panel.table.item(r, 7).text() == "active"
                                for r in range(models_panel.table.rowCount())), timeout=10000)
    window.show_panel("settings")
    _choose_in_combo(qtbot, settings_panel.dial, "eager")
    with qtbot.waitSignal(settings_panel.saved, timeout=30000) as saved:
        qtbot.mouseClick(settings_panel.save_button, Qt.LeftButton)
    assert saved.args == [True]
    on_disk = load_settings(window.services.data_dir)
    assert on_disk.chat_model == folder and on_disk.memory_dial == "eager"


def test_save_writes_only_what_the_user_changed(qtbot, window):
    panel = window.show_panel("settings")
    path = window.services.data_dir / SETTINGS_FILENAME
    # another process wrote the file (a field this panel shows, and one it does not know) and the app has not
    # yet seen it: the watcher is told nothing until the event loop runs
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"chat_model": "/somewhere/else", "from_a_newer_engram": 1,
                                "recall": {"k": 12}}), encoding="utf-8")
    panel.chat_model.setCurrentText("")  # unchanged: the panel showed "" at start
    _choose_in_combo(qtbot, panel.forgetting, "gentle")
    with qtbot.waitSignal(panel.saved, timeout=30000) as saved:
        qtbot.mouseClick(panel.save_button, Qt.LeftButton)
    assert saved.args == [True]
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["chat_model"] == "/somewhere/else"  # not rewritten to ""
    assert raw["from_a_newer_engram"] == 1 and raw["recall"]["k"] == 12
    assert raw["forgetting"]["strength"] == "gentle"
    assert window.services.settings.forgetting.strength == "gentle"
    assert window.services.settings.chat_model == "/somewhere/else"


def test_the_app_keeps_following_a_file_replaced_by_rename(qtbot, window):
    window.show_panel("settings")
    path = window.services.data_dir / SETTINGS_FILENAME
    for dial in ("light", "eager", "off"):  # each an atomic replace, as editors and save_settings do
        tmp = path.with_suffix(".new")
        tmp.write_text(json.dumps({"memory_dial": dial}), encoding="utf-8")
        tmp.replace(path)
        qtbot.waitUntil(lambda dial=dial: window.services.settings.memory_dial == dial, timeout=10000)
        qtbot.waitUntil(lambda dial=dial: window.panels["settings"].dial.currentText() == dial, timeout=10000)


def test_unsaved_edits_survive_a_change_made_elsewhere(qtbot, window, tiny_model_dir):
    panel = window.show_panel("settings")
    _choose_in_combo(qtbot, panel.forgetting, "strong")  # the user is editing, not saved yet
    folder = str(tiny_model_dir.resolve())
    assert run_cli(["--data-dir", str(window.services.data_dir), "models", "use", folder]) == 0
    qtbot.waitUntil(lambda: panel.chat_model.currentText() == folder, timeout=10000)
    assert panel.forgetting.currentText() == "strong"  # still the user's
    with qtbot.waitSignal(panel.saved, timeout=30000) as saved:
        qtbot.mouseClick(panel.save_button, Qt.LeftButton)
    assert saved.args == [True]
    on_disk = load_settings(window.services.data_dir)
    assert on_disk.chat_model == folder and on_disk.forgetting.strength == "strong"


def test_the_idle_time_loop_follows_saved_settings(qtbot, window):
    from PySide6.QtWidgets import QApplication

    from app.ui.background_jobs import BackgroundJobs
    loop = BackgroundJobs(window.services, poll_seconds=0.05)
    window.background = loop.start(QApplication.instance())
    qtbot.waitUntil(lambda: loop._scheduler is not None, timeout=10000)
    panel = window.show_panel("settings")
    panel.idle_minutes.setFocus()
    panel.idle_minutes.selectAll()
    qtbot.keyClicks(panel.idle_minutes, "25")
    with qtbot.waitSignal(panel.saved, timeout=30000):
        qtbot.mouseClick(panel.save_button, Qt.LeftButton)
    assert load_settings(window.services.data_dir).scheduler.idle_minutes == 25
    qtbot.waitUntil(lambda: loop._scheduler.settings.idle_minutes == 25, timeout=10000)  # no restart needed
    loop.stop()
