"""The Memories panel against a real store: pin, delete, restore, edit and purge from the table."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.memory.manage import MemoryManager  # noqa: E402
from core.store import history  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402


@pytest.fixture
def seeded(tmp_path, embedder):
    services = Services.from_data_dir(tmp_path / "home")
    services._embedder = embedder  # the session's real MiniLM, so the test does not load it again
    manager = MemoryManager(services.db, embedder)
    episode = add_episode(services.db, "I moved to Denver last spring")
    ids = [manager.add("User lives in Denver", subject="user", relation="lives_in", object="Denver",
                       source_episode_ids=[episode]).id,
           manager.add("User is allergic to penicillin", critical=True).id,
           manager.add("User prefers short answers").id]
    return services, ids


@pytest.fixture
def panel(qtbot, seeded):
    services, _ = seeded
    window = MainWindow(services)
    qtbot.addWidget(window)
    panel = window.show_panel("memories")
    panel.set_view("full", remember=False)  # the table (the simple view has its own tests)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 3, timeout=5000)
    yield panel
    window.runner.shutdown(wait=True)


def _memory(panel, memory_id):
    """The memory as stored, read on the panel's db lane (the window's connection belongs to it)."""
    return on_db_lane(panel, lambda db: MemoryManager(db, None).get(memory_id))


def _act(qtbot, panel, action):
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        action()


def test_table_shows_memories_and_filters_by_search(panel):
    panel.search.setText("denver")
    assert panel.proxy.rowCount() == 1
    panel.search.setText("")
    assert panel.proxy.rowCount() == 3


def _click_row_of(qtbot, panel, memory_id):
    """A real mouse click on the memory's row in the table, as the user selects it."""
    row = next(r for r, m in enumerate(panel.model.memories) if m.id == memory_id)
    index = panel.proxy.mapFromSource(panel.model.index(row, 0))
    rect = panel.table.visualRect(index)
    qtbot.mouseClick(panel.table.viewport(), Qt.LeftButton, pos=rect.center())
    assert panel.selected_ids() == [memory_id]


def test_pin_delete_and_restore_from_the_table(qtbot, panel, seeded):
    _, (denver, _, _) = seeded
    panel.window().show()
    _click_row_of(qtbot, panel, denver)
    _act(qtbot, panel, panel.buttons["pin"].click)
    assert _memory(panel, denver).pinned
    _click_row_of(qtbot, panel, denver)
    _act(qtbot, panel, panel.buttons["delete"].click)
    assert _memory(panel, denver).status == "trashed"
    assert denver not in [m.id for m in panel.model.memories]  # the active view no longer lists it
    _act(qtbot, panel, lambda: panel.status.setCurrentText("trashed"))
    _click_row_of(qtbot, panel, denver)
    _act(qtbot, panel, panel.buttons["restore"].click)
    assert _memory(panel, denver).status == "active"
    actions = [h.action for h in on_db_lane(panel, history.history, denver)]
    assert actions == ["create", "pin", "delete", "restore"]


def test_bulk_protect_applies_to_every_selected_row(qtbot, panel, seeded):
    _, ids = seeded
    panel.table.selectAll()
    _act(qtbot, panel, panel.on_protect)
    assert all(_memory(panel, i).protected for i in ids)


def test_edit_keeps_the_old_text_in_history(qtbot, panel, seeded):
    _, (denver, _, _) = seeded
    _act(qtbot, panel, lambda: panel.edit_statement(denver, "User lives in Denver, Colorado"))
    entries = on_db_lane(panel, history.history, denver)
    assert entries[-1].action == "update"
    assert entries[-1].old_value["statement"] == "User lives in Denver"


def test_purge_asks_first_and_then_erases(qtbot, panel, seeded):
    _, (_, _, short) = seeded
    panel.select_memory(short)
    _act(qtbot, panel, panel.on_delete)
    _act(qtbot, panel, lambda: panel.status.setCurrentText("trashed"))
    panel.select_memory(short)
    asked = []
    panel.confirm = lambda question: asked.append(question) or False
    panel.on_purge()
    assert asked[0].startswith("Purge 1 selected memory? ")
    assert _memory(panel, short).status == "trashed"  # declined: nothing purged
    panel.confirm = lambda question: True
    _act(qtbot, panel, panel.on_purge)
    assert on_db_lane(panel, lambda db: db.scalar("SELECT count(*) FROM memories WHERE id = ?", (short,))) == 0
    assert panel.message.text() == "Purged 1 memory and 0 conversation turns for good."  # one, not "1 memories"


def test_details_of_a_memory_gone_meanwhile_clear_quietly(qtbot, panel, seeded):
    # After a purge the selection can still name the purged memory until the table reloads; its details must
    # not replace "Purged 1 memory…" with "Could not do that: no memory with id 3" (seen in a loaded suite run).
    _, (_, _, short) = seeded
    panel.select_memory(short)
    qtbot.waitUntil(lambda: "short answers" in panel.detail.toPlainText(), timeout=10000)
    def gone(db):
        manager = MemoryManager(db, None)
        manager.delete(short)
        manager.purge([short], [], reason="test")
    on_db_lane(panel, gone)
    panel.message.setText("Purged 1 memory and 0 conversation turns for good.")
    panel._show_detail()
    qtbot.waitUntil(lambda: panel.detail.toPlainText() == "", timeout=10000)
    assert panel.message.text() == "Purged 1 memory and 0 conversation turns for good."


def test_detail_pane_shows_history_and_source(qtbot, panel, seeded):
    _, (denver, _, _) = seeded
    panel.select_memory(denver)
    qtbot.waitUntil(lambda: "History" in panel.detail.toPlainText(), timeout=5000)
    text = panel.detail.toPlainText()
    assert "I moved to Denver last spring" in text and "create" in text


def test_filters_and_sorting_by_value(qtbot, panel, seeded):
    _, (denver, penicillin, short) = seeded
    _act(qtbot, panel, lambda: panel.flag.setCurrentText("critical"))
    assert [m.id for m in panel.model.memories] == [penicillin]
    _act(qtbot, panel, lambda: panel.flag.setCurrentText("any flags"))
    _act(qtbot, panel, lambda: panel.kind.setCurrentText("episodic"))
    assert panel.model.rowCount() == 0 and not panel.empty.isVisibleTo(panel)  # a filter, not an empty store
    _act(qtbot, panel, lambda: panel.kind.setCurrentText("all kinds"))
    on_db_lane(panel, lambda db: db.execute("UPDATE memories SET confidence = ? WHERE id = ?", (0.05, short)))
    _act(qtbot, panel, panel.reload)
    panel.table.sortByColumn(3, Qt.AscendingOrder)  # confidence, as numbers
    first = panel.proxy.mapToSource(panel.proxy.index(0, 0)).row()
    assert panel.model.memory_at(first).id == short


def test_export_then_import_into_another_store(qtbot, panel, seeded, tmp_path, embedder):
    path = tmp_path / "export.json"
    _act(qtbot, panel, lambda: panel.export_to(str(path)))
    assert "Exported 3 memories" in panel.message.text() and path.is_file()
    other = Services.from_data_dir(tmp_path / "other")
    other._embedder = embedder
    window = MainWindow(other)
    qtbot.addWidget(window)
    target = window.show_panel("memories")
    target.set_view("full", remember=False)
    qtbot.waitUntil(lambda: target.empty.isVisibleTo(target), timeout=5000)  # an empty store says so
    target.import_from(str(path))
    qtbot.waitUntil(lambda: target.model.rowCount() == 3, timeout=30000)
    assert "Imported 3 memories" in target.message.text()
    assert sorted(m.statement for m in target.model.memories) == sorted(m.statement for m in panel.model.memories)
    target.import_from(str(tmp_path / "missing.json"))
    qtbot.waitUntil(lambda: "Could not do that" in target.message.text(), timeout=10000)
    assert target.model.rowCount() == 3
    window.runner.shutdown(wait=True)


def test_changes_elsewhere_show_when_the_panel_is_shown_again(qtbot, panel, seeded):
    """An idle-time job (its own connection) changes the store; coming back to Memories shows it, and an edit made
    here redraws the memory graph too."""
    services, (denver, _, _) = seeded
    window = panel.context.window
    window.show()
    window.show_panel("memories")
    graph = window.show_panel("graph")
    qtbot.waitUntil(lambda: len([n for n in graph.view.nodes if n.kind != "entity"]) == 3, timeout=20000)
    other = open_db(services.db_path)
    MemoryManager(other, None).delete(denver, "forgotten while idle")
    other.close()
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        window.show_panel("memories")
    assert denver not in [m.id for m in panel.model.memories]
    window.store_watch.stop()  # only the edit's signal may redraw the graph now
    with qtbot.waitSignal(graph.drawn, timeout=20000) as drawn:
        panel.select_memory(panel.model.memories[0].id)
        panel.on_delete()
        window.show_panel("graph")
    assert len([n for n in graph.view.nodes if n.kind != "entity"]) == 1 and drawn.args[0] >= 1


def test_deleting_what_the_active_adapter_learned_from_says_so(qtbot, panel, seeded):
    from core.finetune import adapters as versions
    _, (denver, _, short) = seeded

    def trained_on_denver(db):
        adapter = versions.record_adapter(db, name="adapter 1", base_model="base", path="/adapters/1",
                                          status="accepted", metrics={}, config={}, sources={"memory": [denver]})
        versions.activate(db, adapter.id)
    on_db_lane(panel, trained_on_denver)
    panel.select_memory(short)
    _act(qtbot, panel, panel.on_delete)
    assert "adapter" not in panel.message.text()  # it never learned from that one
    panel.select_memory(denver)
    _act(qtbot, panel, panel.on_delete)
    assert "(adapter 1) learned from this memory" in panel.message.text()
    assert on_db_lane(panel, lambda db: versions.active_adapter(db).is_stale)


@pytest.mark.parametrize("key", [Qt.Key_Delete, Qt.Key_Backspace])
def test_the_delete_key_moves_the_selected_memory_to_the_trash(qtbot, panel, seeded, key):
    _, (denver, _, _) = seeded
    panel.window().show()
    _click_row_of(qtbot, panel, denver)
    _act(qtbot, panel, lambda: qtbot.keyClick(panel.table, key))
    assert _memory(panel, denver).status == "trashed"  # the trash: restorable, as the Delete button does
    assert "trash" in panel.message.text()
    panel.search.setText("Denv")  # Backspace in the search field edits the text, it deletes no memory
    panel.search.setFocus()
    qtbot.keyClick(panel.search, Qt.Key_Backspace)
    assert panel.search.text() == "Den"


def test_a_memory_added_by_hand_is_remembered_and_recallable(qtbot, panel, seeded):
    from app.ui.add_memory import AddMemoryDialog
    from core.memory.recall import recall
    assert not panel.add_button.isHidden() and panel.add_button.text() == "Add a memory…"
    dialog = AddMemoryDialog(panel)
    qtbot.addWidget(dialog)
    ok = dialog.buttons.button(dialog.buttons.StandardButton.Ok)
    assert not ok.isEnabled()  # nothing typed yet
    dialog.text.setPlainText("My sister Ana plays the violin in Lisbon.")
    dialog.critical.setChecked(True)
    dialog.show()
    qtbot.keyClick(dialog.text, Qt.Key_Return, Qt.ControlModifier)  # ⌘Return on a Mac: Qt's Ctrl is ⌘ there
    assert dialog.result() == dialog.DialogCode.Accepted
    _act(qtbot, panel, lambda: panel.add_memory(dialog.memory()))
    assert panel.message.text() == "Remembered: My sister Ana plays the violin in Lisbon."
    added = next(m for m in panel.model.memories if m.statement.startswith("My sister"))
    assert added.critical and not added.protected and added.confidence == 0.9  # as `engram memory add`
    hits = on_db_lane(panel, lambda db: recall(db, seeded[0].embedder, "What instrument does Ana play?").hits)
    assert hits[0].id == added.id  # indexed with its vector in the same write
    # the same words again: no copy, the memory is more certain
    _act(qtbot, panel, lambda: panel.add_memory(dialog.memory()))
    assert panel.message.text() == "Already remembered; it is more certain now."
    assert sum(m.statement.startswith("My sister") for m in panel.model.memories) == 1


def test_a_bad_memory_is_refused_in_the_dialog_and_what_was_typed_stays(qtbot, panel):
    from app.ui.add_memory import AddMemoryDialog
    dialog = AddMemoryDialog(panel)
    qtbot.addWidget(dialog)
    dialog.text.setPlainText("x" * 200_001)
    dialog.accept()
    assert dialog.result() != dialog.DialogCode.Accepted
    assert dialog.error.text().startswith("The memory is too long") and len(dialog.text.toPlainText()) == 200_001
