"""Clutter and clipping (issue 14, defect 8), measured in the window at its opening size: every header and
placeholder fits, the goals' questions get room, Memories offers only the actions that apply to the selection,
and the words follow the platform ("this Mac" and ⌘ only on a Mac)."""
from __future__ import annotations

import sys

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.memory.manage import MemoryManager  # noqa: E402
from core.store import goals  # noqa: E402

PADDING = 8  # a header section's text needs at least this much beside it (the style's margins)
ON_A_MAC = sys.platform == "darwin"


def _window(qtbot, services):
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def _fits(header, section: int) -> bool:
    label = header.model().headerData(section, Qt.Horizontal, Qt.DisplayRole)
    return header.sectionSize(section) >= header.fontMetrics().horizontalAdvance(label) + PADDING


def test_every_models_header_fits_and_speaks_of_this_machine(qtbot, window):
    panel = window.show_panel("models")
    qtbot.waitUntil(lambda: panel.table.rowCount() > 0 and panel.recommended is not None, timeout=10000)
    header = panel.table.horizontalHeader()
    clipped = [header.model().headerData(i, Qt.Horizontal) for i in range(header.count()) if not _fits(header, i)]
    assert clipped == []
    labels = [header.model().headerData(i, Qt.Horizontal) for i in range(header.count())]
    words = " ".join(labels) + " " + panel.banner.text()
    assert ("this Mac" in words) == ON_A_MAC and ("this computer" in words) != ON_A_MAC


def test_the_memories_placeholders_are_not_clipped_and_name_no_terminal_command(qtbot, window):
    panel = window.show_panel("memories")
    panel.set_view("full", remember=False)  # the table's placeholders (the simple view's: test_gui_memories_simple)
    qtbot.waitUntil(lambda: panel.empty.isVisibleTo(panel), timeout=10000)
    qtbot.wait(50)  # the layout settles
    empty = panel.empty
    needed = empty.heightForWidth(empty.width()) if empty.wordWrap() else empty.sizeHint().height()
    assert empty.height() >= needed
    assert empty.wordWrap() or empty.width() >= empty.fontMetrics().horizontalAdvance(empty.text())
    assert "`" not in empty.text() and "engram " not in empty.text()
    detail = panel.detail
    hint = detail.placeholderText()
    margins = 2 * detail.frameWidth() + 2 * int(detail.document().documentMargin())
    assert detail.viewport().width() + 2 * detail.frameWidth() >= detail.fontMetrics().horizontalAdvance(hint) + margins


def test_a_goals_question_keeps_its_room_beside_long_reasons(qtbot, tmp_path):
    services = Services.from_data_dir(tmp_path / "home")
    long_reason = "you mentioned it in three conversations about climbing, bouldering and the gym near work " * 2
    goals.open_goal(services.db, "Which climbing gym do you go to?", reason=long_reason)
    answered = goals.open_goal(services.db, "Do you prefer metric units?", reason=long_reason)
    goals.close_goal(services.db, answered, "yes, metric, always, for distances and weights and recipes " * 2)
    window = _window(qtbot, services)
    panel = window.show_panel("hypotheses")
    qtbot.waitUntil(lambda: panel.open_goals.topLevelItemCount() == 1, timeout=10000)
    for tree in (panel.open_goals, panel.closed_goals):
        qtbot.mouseClick(panel.goals.tabBar(), Qt.LeftButton,
                         pos=panel.goals.tabBar().tabRect(panel.goals.indexOf(tree)).center())
        assert panel.goals.currentWidget() is tree
        qtbot.wait(50)
        question = tree.topLevelItem(0).text(0)
        width = tree.header().sectionSize(0)
        assert width >= tree.fontMetrics().horizontalAdvance(question) + PADDING or \
            width >= tree.viewport().width() // 3, (width, tree.viewport().width())
    window.runner.shutdown(wait=True)
    services.close()


def test_memories_offers_only_what_applies_to_the_selection(qtbot, tmp_path, embedder):
    services = Services.from_data_dir(tmp_path / "home")
    services._embedder = embedder
    manager = MemoryManager(services.db, embedder)
    plain = manager.add("User likes tea").id
    pinned = manager.add("User is allergic to penicillin").id
    manager.pin(pinned)
    window = _window(qtbot, services)
    panel = window.show_panel("memories")
    panel.set_view("full", remember=False)  # the table and its buttons
    qtbot.waitUntil(lambda: panel.model.rowCount() == 2, timeout=10000)

    def enabled():
        return {name for name, button in panel.buttons.items() if button.isEnabled()}

    always = {"export", "import"}
    assert enabled() == always  # nothing selected: nothing to pin, edit or delete
    _click(qtbot, panel, plain)
    assert enabled() == always | {"pin", "protect", "edit", "delete"}
    _click(qtbot, panel, pinned)
    assert enabled() == always | {"unpin", "protect", "edit", "delete"}
    panel.table.selectAll()
    assert enabled() == always | {"pin", "unpin", "protect", "delete"}  # edit is for one memory
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        qtbot.mouseClick(panel.buttons["delete"], Qt.LeftButton)
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        panel.status.setCurrentText("trashed")
    assert enabled() == always | {"purge"}  # the whole trash can be purged
    _click(qtbot, panel, plain)
    assert enabled() == always | {"restore", "purge"}  # a memory in the trash is restored or purged, not edited
    window.runner.shutdown(wait=True)
    services.close()


def _click(qtbot, panel, memory_id):
    row = next(r for r, m in enumerate(panel.model.memories) if m.id == memory_id)
    rect = panel.table.visualRect(panel.proxy.mapFromSource(panel.model.index(row, 0)))
    qtbot.mouseClick(panel.table.viewport(), Qt.LeftButton, pos=rect.center())
    assert panel.selected_ids() == [memory_id]
