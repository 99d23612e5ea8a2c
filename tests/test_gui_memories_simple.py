"""The Memories panel's simple view ("What Engram believes about you") and "Forget everything", clicked and typed
as a user does, against a real store."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.config import SETTINGS_FILENAME  # noqa: E402
from core.memory.manage import MemoryManager  # noqa: E402
from core.store import health  # noqa: E402
from core.store.db import open_db  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402


@pytest.fixture
def seeded(tmp_path, embedder):
    services = Services.from_data_dir(tmp_path / "home")
    services._embedder = embedder
    manager = MemoryManager(services.db, embedder)
    add_episode(services.db, "I moved to Denver last spring")
    tea = manager.add("User likes green tea", subject="user", relation="likes", object="green tea").id
    allergy = manager.add("User is allergic to penicillin", critical=True, protected=True).id
    denver = manager.add("User lives in Denver", subject="user", relation="lives_in", object="Denver").id
    services.db.execute("UPDATE memories SET importance = 0.9 WHERE id = ?", (denver,))
    summary = manager.add("Summary of a chat about trains", kind="summary").id
    return services, {"tea": tea, "allergy": allergy, "denver": denver, "summary": summary}


def _window(qtbot, services):
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    panel = window.show_panel("memories")
    qtbot.waitUntil(lambda: panel.simple.list.count() == 3, timeout=10000)
    return window, panel


@pytest.fixture
def panel(qtbot, seeded):
    window, panel = _window(qtbot, seeded[0])
    yield panel
    window.runner.shutdown(wait=True)


def _status(panel, memory_id):
    return on_db_lane(panel, lambda db: MemoryManager(db, None).get(memory_id).status)


def test_the_simple_view_lists_beliefs_as_sentences_most_important_first(panel, seeded):
    assert panel.view() == "simple" and panel.simple.isVisible() and not panel.table.isVisible()
    assert panel.simple.heading.text() == "What Engram believes about you"
    # protected (and critical) first, then by importance; a conversation summary is not a belief. Said to the
    # person reading them ("You like …", not "User likes …"); stored as they were.
    assert panel.simple.statements() == ["You are allergic to penicillin", "You live in Denver",
                                         "You like green tea"]
    assert panel.simple.rows[seeded[1]["tea"]].sentence.text() == "You like green tea"
    assert on_db_lane(panel, lambda db: MemoryManager(db, None).get(seeded[1]["tea"]).statement) == \
        "User likes green tea"
    allergy = panel.simple.rows[seeded[1]["allergy"]]
    assert "Protected" in allergy.state.text() and not allergy.delete.isEnabled() and not allergy.wrong.isEnabled()
    assert panel.simple.rows[seeded[1]["tea"]].wrong.isEnabled()


def test_the_chosen_view_is_remembered_across_restarts_merging_only_that_field(qtbot, seeded):
    services, _ = seeded
    settings_file = services.data_dir / SETTINGS_FILENAME
    settings_file.write_text(json.dumps({"chat_model": "/models/mine"}), encoding="utf-8")
    window, panel = _window(qtbot, services)
    qtbot.mouseClick(panel.view_buttons["full"], Qt.LeftButton)
    assert panel.view() == "full" and panel.table.isVisible()
    # the chosen view reads as chosen in either mode (bold), not only by Fusion's faint checked shade
    assert panel.view_buttons["full"].font().bold() and not panel.view_buttons["simple"].font().bold()
    assert json.loads(settings_file.read_text(encoding="utf-8")) == {"chat_model": "/models/mine",
                                                                     "memories_view": "full"}
    window.runner.shutdown(wait=True)
    window.close()
    again = Services.from_data_dir(services.data_dir)
    again._embedder = services._embedder
    window2 = MainWindow(again)
    qtbot.addWidget(window2)
    assert window2.show_panel("memories").view() == "full"
    window2.runner.shutdown(wait=True)
    again.close()


def test_delete_from_the_simple_view_goes_to_the_trash_and_back(qtbot, panel, seeded):
    tea = seeded[1]["tea"]
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        qtbot.mouseClick(panel.simple.rows[tea].delete, Qt.LeftButton)
    assert _status(panel, tea) == "trashed" and "trash" in panel.message.text()
    assert "You like green tea" not in panel.simple.statements()
    on_db_lane(panel, lambda db: MemoryManager(db, None).restore(tea))  # restorable, as every delete
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        panel.reload()
    assert "You like green tea" in panel.simple.statements()


@pytest.mark.parametrize("key", [Qt.Key_Delete, Qt.Key_Backspace])
def test_the_delete_key_works_in_the_simple_view(qtbot, panel, seeded, key):
    denver = seeded[1]["denver"]
    assert panel.simple.select(denver)
    panel.simple.list.setFocus()
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        qtbot.keyClick(panel.simple.list, key)
    assert _status(panel, denver) == "trashed"


def test_this_is_wrong_removes_it_and_records_the_rejection(qtbot, panel, seeded):
    tea = seeded[1]["tea"]
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        qtbot.mouseClick(panel.simple.rows[tea].wrong, Qt.LeftButton)
    assert _status(panel, tea) == "trashed" and "will not learn this again" in panel.message.text()
    assert on_db_lane(panel, lambda db: db.scalar("SELECT count(*) FROM rejections WHERE memory_id = ?", (tea,))) == 2


def _counts(db):
    return {t: db.scalar(f"SELECT count(*) FROM {t}") for t in ("memories", "episodes", "memory_vec_float")}


def test_forget_everything_needs_the_typed_word_backs_up_and_can_be_restored(qtbot, panel, seeded):
    services, _ = seeded
    before = on_db_lane(panel, _counts)
    qtbot.mouseClick(panel.forget_all, Qt.LeftButton)
    qtbot.waitUntil(lambda: getattr(panel, "forget_dialog", None) is not None and panel.forget_dialog.isVisible(),
                    timeout=10000)
    dialog = panel.forget_dialog
    assert "4 memories" in dialog.findChild(type(panel.message)).text() and not dialog.erase.isEnabled()
    qtbot.keyClicks(dialog.word, "forget")
    assert not dialog.erase.isEnabled()  # the word as shown, not any spelling of it
    qtbot.keyClick(dialog.word, Qt.Key_Return)
    assert dialog.isVisible() and on_db_lane(panel, _counts) == before  # Return does not get round it
    qtbot.mouseClick(dialog.buttons.button(dialog.buttons.StandardButton.Cancel), Qt.LeftButton)
    assert on_db_lane(panel, _counts) == before and not (services.data_dir / "backups").exists()
    qtbot.mouseClick(panel.forget_all, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.forget_dialog is not dialog and panel.forget_dialog.isVisible(), timeout=10000)
    dialog = panel.forget_dialog
    qtbot.keyClicks(dialog.word, "FORGET")
    assert dialog.erase.isEnabled()
    with qtbot.waitSignal(panel.loaded, timeout=20000):
        qtbot.mouseClick(dialog.erase, Qt.LeftButton)
    assert on_db_lane(panel, _counts) == {"memories": 0, "episodes": 0, "memory_vec_float": 0}
    assert panel.simple.list.count() == 0 and panel.simple.empty.isVisibleTo(panel)
    backup = next((services.data_dir / "backups").glob("engram-*-before-forget-everything.db"))
    assert str(backup) in panel.message.text() and "engram " not in panel.message.text().replace(str(backup), "")
    assert panel.bring_back.isVisible()  # undo in the app, no terminal needed (the CLI test restores the file)
    with qtbot.waitSignal(panel.loaded, timeout=20000):
        qtbot.mouseClick(panel.bring_back, Qt.LeftButton)
    assert on_db_lane(panel, _counts) == before and panel.simple.list.count() == 3
    assert "Brought back 4 memories" in panel.message.text() and not panel.bring_back.isVisible()
    panel.runner.shutdown(wait=True)
    services.close()
    health.restore(services.db_path, backup)  # and the file itself, as `engram doctor --restore` puts it back
    restored = open_db(services.db_path)
    assert _counts(restored) == before
    restored.close()


def test_an_empty_store_says_so_in_words_and_pinned_shows(qtbot, tmp_path, embedder):
    services = Services.from_data_dir(tmp_path / "empty")
    services._embedder = embedder
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    panel = window.show_panel("memories")
    qtbot.waitUntil(lambda: panel.simple.empty.isVisibleTo(panel), timeout=10000)
    empty = panel.simple.empty
    assert empty.wordWrap() and "`" not in empty.text() and "engram " not in empty.text()
    assert not panel.simple.list.isVisibleTo(panel)
    window.resize(1100, 760)
    qtbot.wait(50)
    heading = panel.simple.heading
    # the heading keeps its own height at the top; the empty text takes the room the hidden list leaves
    assert heading.height() <= heading.sizeHint().height() + 8 and heading.y() < 20
    memory = on_db_lane(window, lambda db: MemoryManager(db, embedder).add("User prefers metric units", pinned=True))
    with qtbot.waitSignal(panel.loaded, timeout=10000):
        panel.reload()
    assert panel.simple.rows[memory.id].state.text() == "Pinned" and panel.simple.rows[memory.id].delete.isEnabled()
    window.runner.shutdown(wait=True)
    services.close()


def test_rows_are_as_tall_as_their_sentence_at_the_list_width(qtbot):
    """Seen in the screenshot: one-line rows came out 30, 36 or 50 px tall (each row's size hint guessed its own
    width); now every one-line row is the same height, and a long fact wraps in a taller row that shows it all."""
    from app.ui.memories_simple import SimpleMemories
    from core.types import Memory
    simple = SimpleMemories()
    qtbot.addWidget(simple)
    simple.resize(1000, 600)
    simple.show()
    texts = ["User's manager is Priya", "User's quarterly report is due on Friday", "User lives in Denver",
             "User sent a V4 boulder problem", "User likes " + "long sentences that go on and on, " * 8]
    simple.set_memories([Memory(id=i + 1, statement=t, created_at=float(i)) for i, t in enumerate(texts)])
    qtbot.waitUntil(lambda: simple.list.count() == 5)
    rows = {simple.list.itemWidget(simple.list.item(i)).memory.id: simple.list.item(i) for i in range(5)}
    heights = {memory_id: simple.list.visualItemRect(item).height() for memory_id, item in rows.items()}
    assert len({heights[i] for i in (1, 2, 3, 4)}) == 1, heights  # one line each: one height
    long_row = simple.rows[5]
    assert heights[5] > heights[1]
    assert heights[5] >= long_row.sentence.heightForWidth(long_row.sentence.width())  # nothing cut off
