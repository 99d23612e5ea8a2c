"""The chat's "Remembered: …" rows and memory chips follow changes made elsewhere (issue 14, defect 3): an edit or a
delete in the Memories panel, or by another process (the CLI) while the app is open — offscreen, the real store,
MiniLM and the tiny MLX model (extraction scripted: the tiny model's words hold no fact that grounding keeps)."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QInputDialog  # noqa: E402

from app.ui.chat_memory_watch import ShownMemory  # noqa: E402
from app.ui.chat_chips import MemoryChip  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.memories import trash_memory  # noqa: E402
from tests.fakes import ScriptedStructuredModel  # noqa: E402
from tests.test_gui_chat import TURN_MS, _fact, scalar, window_fixture  # noqa: E402,F401 - the fixture

EDITED = "User plays the cello in an orchestra"
EDITED_SHOWN = "You play the cello in an orchestra"  # the chat's row says it to you (core.second_person)


def _remembered_row(qtbot, window):
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": [{"facts": [_fact("user", "plays", "cello", "User plays the cello")]}],
         "usefulness_rating": [{"useful": []}],
         "reconcile_decision": [{"decision": "new", "target": 0, "reason": "different"}]})
    panel = window.show_panel("chat")
    with qtbot.waitSignal(panel.learned, timeout=TURN_MS):
        qtbot.mouseClick(panel.composer, Qt.LeftButton)
        qtbot.keyClicks(panel.composer, "I play the cello every evening")
        qtbot.keyClick(panel.composer, Qt.Key_Return)
    reply = panel.replies()[-1]
    qtbot.waitUntil(lambda: bool(reply.learned_rows()), timeout=10000)
    [row] = reply.learned_rows()
    assert row.caption.text() == "Remembered:" and row.open_button.text() == "You play the cello"
    return panel, row


def test_the_remembered_row_follows_an_edit_and_a_delete_in_memories(qtbot, window, monkeypatch):
    panel, row = _remembered_row(qtbot, window)
    memory = row.memory_id
    qtbot.mouseClick(row.open_button, Qt.LeftButton)  # opens it, selected, in Memories
    memories = window.panels["memories"]
    qtbot.waitUntil(lambda: memories.selected_ids() == [memory], timeout=20000)
    monkeypatch.setattr(QInputDialog, "getMultiLineText", staticmethod(lambda *a, **k: (EDITED, True)))
    qtbot.mouseClick(memories.buttons["edit"], Qt.LeftButton)
    qtbot.waitUntil(lambda: row.open_button.text() == EDITED_SHOWN, timeout=30000)  # the chat's row: the new words
    assert row.caption.text() == "Remembered:" and EDITED_SHOWN in row.open_button.toolTip()

    qtbot.waitUntil(lambda: EDITED in [m.statement for m in memories.model.memories], timeout=20000)  # reloaded
    memories.select_memory(memory)  # as a click on its row would
    assert memories.buttons["delete"].isEnabled()
    qtbot.mouseClick(memories.buttons["delete"], Qt.LeftButton)
    qtbot.waitUntil(lambda: row.caption.text() == "Deleted:", timeout=20000)
    assert row.undo_button.text() == "Restore" and row.open_button.text() == EDITED_SHOWN

    window.show_panel("chat")  # Restore, from the chat's row: back from the trash
    qtbot.mouseClick(row.undo_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: scalar(window, "SELECT deleted_at FROM memories WHERE id = ?", memory) is None,
                    timeout=10000)
    qtbot.waitUntil(lambda: row.caption.text() == "Remembered:" and row.undo_button.text() == "Undo",
                    timeout=10000)


def test_the_remembered_row_follows_a_delete_by_another_process(qtbot, window):
    panel, row = _remembered_row(qtbot, window)
    other = open_db(window.services.db_path)  # as `engram memory delete` would, while the app is open
    try:
        trash_memory(other, row.memory_id, "deleted from the command line")
    finally:
        other.close()
    qtbot.waitUntil(lambda: row.caption.text() == "Deleted:", timeout=20000)  # the next look at data_version
    assert row.undo_button.text() == "Restore" and row.undo_button.isVisibleTo(row)


def test_a_chip_shows_new_words_and_a_struck_out_deleted_memory(qtbot):
    chip = MemoryChip(7, "User likes jasmine tea", why="about tea")
    qtbot.addWidget(chip)
    chip.show_memory(ShownMemory("User likes green tea", deleted=False))
    assert chip.open_button.text() == "You like green tea" and not chip.open_button.font().strikeOut()
    assert chip.veto_button.isVisibleTo(chip) and "Why: about tea" in chip.open_button.toolTip()
    chip.show_memory(ShownMemory("User likes green tea", deleted=True))
    assert chip.open_button.font().strikeOut() and not chip.veto_button.isVisibleTo(chip)
    assert "In the trash" in chip.open_button.toolTip() and chip.open_button.isEnabled()
    chip.show_memory(None)  # purged for good: nothing to open
    assert not chip.open_button.isEnabled()


def test_undo_under_a_move_brings_the_old_city_back(qtbot, window):
    """"I moved to Porto" closes "lives in Lisbon" (core.memory.said_reconcile); Undo under that reply used to trash
    Porto and leave Lisbon closed: neither city in About you."""
    window.services.structured_model = lambda: ScriptedStructuredModel(
        {"engram_facts": lambda m, s: {"facts": []}, "usefulness_rating": lambda m, s: {"useful": []},
         "reconcile_decision": lambda m, s: {"decision": "new", "target": 1, "reason": "weak"}})
    panel = window.show_panel("chat")
    for text in ("I live in Lisbon.", "I moved to Porto."):
        with qtbot.waitSignal(panel.learned, timeout=TURN_MS):
            qtbot.mouseClick(panel.composer, Qt.LeftButton)
            qtbot.keyClicks(panel.composer, text)
            qtbot.keyClick(panel.composer, Qt.Key_Return)
    reply = panel.replies()[-1]
    qtbot.waitUntil(lambda: bool(reply.learned_rows()), timeout=10000)
    [row] = reply.learned_rows()
    assert row.open_button.text() == "You moved to Porto."
    assert row.instead.isVisibleTo(row) and row.instead.text() == "instead of “You live in Lisbon.”"
    lives = "SELECT group_concat(object) FROM memories WHERE relation = 'lives_in' AND invalidated_at IS NULL " \
            "AND deleted_at IS NULL"
    assert scalar(window, lives) == "Porto"
    qtbot.mouseClick(row.undo_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: scalar(window, lives) == "Lisbon", timeout=10000)
    qtbot.waitUntil(lambda: row.undo_button.text() == "Restore", timeout=10000)
    qtbot.mouseClick(row.undo_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: scalar(window, lives) == "Porto", timeout=10000)
