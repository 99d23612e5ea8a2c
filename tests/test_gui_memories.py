"""The Memories panel against a real store: pin, delete, restore, edit and purge from the table."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from app.services import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.memory.manage import MemoryManager  # noqa: E402
from core.store import history  # noqa: E402
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
    qtbot.waitUntil(lambda: panel.model.rowCount() == 3, timeout=5000)
    yield panel
    window.runner.shutdown(wait=True)


def _act(qtbot, panel, action):
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        action()


def test_table_shows_memories_and_filters_by_search(panel):
    panel.search.setText("denver")
    assert panel.proxy.rowCount() == 1
    panel.search.setText("")
    assert panel.proxy.rowCount() == 3


def test_pin_delete_and_restore_from_the_table(qtbot, panel, seeded):
    services, (denver, _, _) = seeded
    assert panel.select_memory(denver)
    _act(qtbot, panel, panel.on_pin)
    assert services.manager().get(denver).pinned
    assert panel.select_memory(denver)
    _act(qtbot, panel, panel.on_delete)
    assert services.manager().get(denver).status == "trashed"
    assert denver not in [m.id for m in panel.model.memories]  # the active view no longer lists it
    _act(qtbot, panel, lambda: panel.status.setCurrentText("trashed"))
    assert panel.select_memory(denver)
    _act(qtbot, panel, panel.on_restore)
    assert services.manager().get(denver).status == "active"
    actions = [h.action for h in on_db_lane(panel, history.history, denver)]
    assert actions == ["create", "pin", "delete", "restore"]


def test_bulk_protect_applies_to_every_selected_row(qtbot, panel, seeded):
    services, ids = seeded
    panel.table.selectAll()
    _act(qtbot, panel, panel.on_protect)
    assert all(services.manager().get(i).protected for i in ids)


def test_edit_keeps_the_old_text_in_history(qtbot, panel, seeded):
    services, (denver, _, _) = seeded
    _act(qtbot, panel, lambda: panel.edit_statement(denver, "User lives in Denver, Colorado"))
    entries = on_db_lane(panel, history.history, denver)
    assert entries[-1].action == "update"
    assert entries[-1].old_value["statement"] == "User lives in Denver"


def test_purge_asks_first_and_then_erases(qtbot, panel, seeded):
    services, (_, _, short) = seeded
    panel.select_memory(short)
    _act(qtbot, panel, panel.on_delete)
    panel.confirm = lambda question: False
    panel.on_purge()
    assert services.manager().get(short).status == "trashed"  # declined: nothing purged
    panel.confirm = lambda question: True
    _act(qtbot, panel, panel.on_purge)
    assert on_db_lane(panel, lambda db: db.scalar("SELECT count(*) FROM memories WHERE id = ?", (short,))) == 0


def test_detail_pane_shows_history_and_source(qtbot, panel, seeded):
    _, (denver, _, _) = seeded
    panel.select_memory(denver)
    qtbot.waitUntil(lambda: "History" in panel.detail.toPlainText(), timeout=5000)
    text = panel.detail.toPlainText()
    assert "I moved to Denver last spring" in text and "create" in text
