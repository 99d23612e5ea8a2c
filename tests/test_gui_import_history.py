"""Issue 39 §1 in the window: File → Import from Another Assistant… and an export dropped on the window bring the
conversations into the chat list, marked with where they came from; a bad file changes nothing and says why."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from app.services.wiring import Services
from app.ui.main_window import MainWindow
from tests import import_fixtures as fx
from tests.guikit import on_db_lane


@pytest.fixture
def window(qtbot, tmp_path, embedder):
    services = Services.from_data_dir(tmp_path / "home")
    services._embedder = embedder
    window = MainWindow(services)
    qtbot.addWidget(window)
    yield window
    window.runner.shutdown(wait=True)


def _import(qtbot, window, start):
    told = []
    from app.ui.import_history import attach
    attach(window).tell = lambda _title, text: told.append(text)
    start()
    qtbot.waitUntil(lambda: bool(told), timeout=60_000)
    return told[0]


def _drop(window, path):
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(path))])
    window.dropEvent(QDropEvent(QPointF(10, 10), Qt.CopyAction, data, Qt.LeftButton, Qt.NoModifier))


def test_an_export_dropped_on_the_window_fills_the_chat_list(qtbot, window, tmp_path):
    chat = window.show_panel("chat")
    text = _import(qtbot, window, lambda: _drop(window, fx.claude_zip(tmp_path)))
    assert text.startswith("Imported 2 turns in 1 conversation, 3 memories.") and "Left out:" in text
    qtbot.waitUntil(lambda: chat.sessions.list.count() == 2, timeout=10_000)
    titles = {chat.sessions.list.item(i).text(): chat.sessions.list.item(i) for i in range(2)}
    assert "Trip planning" in titles
    assert "imported from Claude, 2024-05-02" in titles["Trip planning"].toolTip()
    stored = on_db_lane(window, lambda db: db.scalar("SELECT count(*) FROM episodes"))
    assert stored == 3  # two turns and the memory list they came with
    again = _import(qtbot, window, lambda: _drop(window, fx.claude_zip(tmp_path)))
    assert again.startswith("Imported 0 turns") and "5 were already here" in again


def test_the_file_menu_imports_and_a_bad_file_changes_nothing(qtbot, window, tmp_path, monkeypatch):
    assert "Import from Another Assistant…" in [a.text() for a in window.menu_actions.values()]
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    monkeypatch.setattr("app.ui.import_history.QFileDialog.getOpenFileName", lambda *a, **k: (str(bad), ""))
    text = _import(qtbot, window, window.menu_actions["import_history"].trigger)
    assert text.startswith("Nothing was imported:") and "not an export Engram can read" in text
    assert on_db_lane(window, lambda db: db.scalar("SELECT count(*) FROM episodes")) == 0
    monkeypatch.setattr("app.ui.import_history.QFileDialog.getOpenFileName",
                        lambda *a, **k: (str(fx.chatgpt_zip(tmp_path)), ""))
    text = _import(qtbot, window, window.menu_actions["import_history"].trigger)
    assert text.startswith("Imported 4 turns in 2 conversations.")


def test_jobs_says_how_far_learning_from_an_import_is(qtbot, window, tmp_path):
    _import(qtbot, window, lambda: _drop(window, fx.chatgpt_zip(tmp_path)))
    jobs = window.show_panel("jobs")
    qtbot.waitUntil(lambda: jobs.imports_label.text() != "", timeout=20_000)
    assert jobs.imports_label.text() == ("Learning from your imported history while you are away: "
                                         "ChatGPT 0 of 4 turns")


def test_about_you_groups_what_an_import_brought_under_its_source(qtbot, window, tmp_path, embedder):
    from core.memory.manage import MemoryManager
    on_db_lane(window, lambda db: MemoryManager(db, embedder).add("The user lives in Porto"))
    _import(qtbot, window, lambda: _drop(window, fx.claude_zip(tmp_path)))
    panel = window.show_panel("memories")
    panel.set_view("simple", remember=False)
    qtbot.waitUntil(lambda: "## From your Claude history" in panel.simple.statements(), timeout=20_000)
    shown = panel.simple.statements()
    assert shown[0] == "You live in Porto"  # what the user told Engram itself comes first
    heading = shown.index("## From your Claude history")
    assert set(shown[heading + 1:]) == {"Works as a nurse at the children's hospital", "Prefers metric units",
                                        "Is learning German."}


def test_an_imported_conversation_shows_where_it_came_from_under_its_title(qtbot, window, tmp_path):
    from core.store.sessions import create_session
    window.show()
    chat = window.show_panel("chat")
    on_db_lane(window, lambda db: create_session(db, "My own talk"))
    _import(qtbot, window, lambda: _drop(window, fx.claude_zip(tmp_path)))
    qtbot.waitUntil(lambda: chat.sessions.list.count() == 3, timeout=10_000)
    listing = chat.sessions.list
    items = {listing.item(i).text(): listing.item(i) for i in range(3)}
    assert items["Trip planning"].data(Qt.UserRole + 1) == "imported from Claude, 2024-05-02"
    assert items["My own talk"].data(Qt.UserRole + 1) is None
    imported, own = (listing.visualItemRect(items[t]) for t in ("Trip planning", "My own talk"))
    assert imported.height() > own.height() * 1.5  # a second line under the title

    def inked(rect):  # whether anything but the row's background is drawn in the row's lower part
        image = listing.viewport().grab(rect).toImage()
        band = range(image.height() * 3 // 5, image.height() - 1)
        return any(image.pixelColor(x, y) != image.pixelColor(image.width() - 2, y)
                   for y in band for x in range(2, image.width() // 2))
    assert inked(imported)
    chat.sessions.rename(int(items["Trip planning"].data(Qt.UserRole)), "Trip to Lisbon")  # the title only
    qtbot.waitUntil(lambda: "Trip to Lisbon" in [listing.item(i).text() for i in range(listing.count())],
                    timeout=10_000)
    assert on_db_lane(window, lambda db: db.scalar("SELECT count(*) FROM sessions WHERE title = 'Trip to Lisbon'")) == 1
