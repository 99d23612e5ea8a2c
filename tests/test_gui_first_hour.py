"""Issue 14's "Must show": a person's first hour, clicked and typed through one window on a fresh data folder.

The reply streams from the real tiny MLX model, loaded from the folder the user adds. What a turn teaches comes from
the scripted structured model (tests/fakes.py), as in test_gui_chat.py: the tiny model's random words hold no fact
that grounding would keep, so nothing real could be learned from them.
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QFileDialog, QInputDialog  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import open_main_window  # noqa: E402
from app.ui.onboarding import onboarding_seen  # noqa: E402
from core.config import SETTINGS_FILENAME  # noqa: E402
from tests.fakes import ScriptedStructuredModel  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402

TURN_MS = 180_000  # a whole turn on the tiny model, loaded from its folder on the first one
CELLO = "User plays the cello"
EDITED = "User plays the cello in an orchestra"
TURNS = ("Hello! I'm trying Engram for the first time.", "I play the cello every evening",
         "What should I practise tonight?")


def _facts(messages, _schema) -> dict:
    """The cello fact only from the turn that says it (the user's own words are the last message's)."""
    said = messages[-1].content if messages else ""
    if "I play the cello every evening" not in said:
        return {"facts": []}
    return {"facts": [{"subject": "user", "relation": "plays", "object": "cello", "statement": CELLO,
                       "confidence": 90, "kind": "semantic", "critical": False, "source": "user_said", "when": ""}]}


def _script() -> ScriptedStructuredModel:
    return ScriptedStructuredModel({"engram_facts": _facts, "usefulness_rating": [{"useful": []}],
                                    "reconcile_decision": [{"decision": "new", "target": 0, "reason": "new"}]})


def _type_and_send(qtbot, chat, text: str):
    qtbot.mouseClick(chat.composer, Qt.LeftButton)
    qtbot.keyClicks(chat.composer, text)
    with qtbot.waitSignal(chat.learned, timeout=TURN_MS):
        qtbot.keyClick(chat.composer, Qt.Key_Return)
    return chat.replies()[-1]


def _menu_action(window, menu_title: str, label: str):
    menus = {a.text().replace("&", ""): a.menu() for a in window.menuBar().actions()}
    return next(a for a in menus[menu_title].actions() if a.text().replace("&", "") == label)


def _memory(window, memory_id: int):
    return on_db_lane(window, lambda db: db.query_one("SELECT statement, deleted_at FROM memories WHERE id = ?",
                                                      (memory_id,)))


def test_a_first_hour(qtbot, tmp_path, tiny_model_dir, embedder, monkeypatch):
    home = tmp_path / "fresh-home"
    services = Services.from_data_dir(home)
    services._embedder = embedder  # the same bundled MiniLM, loaded once for the whole run
    script = _script()
    services.structured_model = lambda: script
    window = open_main_window(services)
    qtbot.addWidget(window)
    window.show()
    quits = []
    window.exit_application = lambda: quits.append(True)

    # first start: the welcome screen says what is kept and where; its button leads to Models
    qtbot.waitUntil(lambda: window.onboarding is not None and window.onboarding.isVisible(), timeout=10000)
    assert str(services.db_path) in window.onboarding.keeps.text()
    qtbot.waitUntil(lambda: "Recommended for" in window.onboarding.model.text(), timeout=60000)
    qtbot.mouseClick(window.onboarding.models_button, Qt.LeftButton)
    assert not window.onboarding.isVisible()
    models = window.panels["models"]
    assert window.stack.currentWidget() is models and services.settings.chat_model == ""
    qtbot.waitUntil(lambda: models.recommended is not None, timeout=20000)

    # add a local model folder with "Add a model…" (the platform's folder dialog answers with the tiny model)
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(tiny_model_dir)))
    with qtbot.waitSignal(models.added, timeout=60000) as added:
        qtbot.mouseClick(models.buttons["add"], Qt.LeftButton)
    assert added.args == [True], models.message.text()
    chosen = str(tiny_model_dir.resolve())
    assert services.settings.chat_model == chosen  # the first model added is the one Engram chats with

    # chat three turns, typed; "Remembered" under the reply that taught something
    _menu_action(window, "View", "Chat").trigger()
    chat = window.panels["chat"]
    assert window.stack.currentWidget() is chat
    qtbot.waitUntil(lambda: not chat.banner.isVisible(), timeout=20000)  # no "no model" banner any more
    replies = [_type_and_send(qtbot, chat, text) for text in TURNS]
    assert all(r.text and r.episode_id for r in replies)  # each reply streamed from the tiny model and was stored
    qtbot.waitUntil(lambda: bool(replies[1].learned_rows()), timeout=10000)
    [row] = replies[1].learned_rows()
    assert row.caption.text() == "Remembered:" and row.open_button.text() == "You play the cello"
    assert row.isVisibleTo(replies[1])
    assert replies[0].learned_rows() == [] and replies[2].learned_rows() == []
    memory_id = row.memory_id

    # open that memory from its link under the reply
    qtbot.mouseClick(row.open_button, Qt.LeftButton)
    memories = window.panels["memories"]
    assert window.stack.currentWidget() is memories
    qtbot.waitUntil(lambda: memories.selected_ids() == [memory_id], timeout=20000)

    # edit it: Edit…, type the new words in the dialog
    assert memories.buttons["edit"].isEnabled()
    monkeypatch.setattr(QInputDialog, "getMultiLineText", staticmethod(lambda *a, **k: (EDITED, True)))
    qtbot.mouseClick(memories.buttons["edit"], Qt.LeftButton)
    qtbot.waitUntil(lambda: _memory(window, memory_id)["statement"] == EDITED, timeout=30000)
    qtbot.waitUntil(lambda: EDITED in [m.statement for m in memories.model.memories], timeout=20000)

    # the graph: search its new words; the memory is selected, centred and highlighted with its neighbours
    _menu_action(window, "View", "Memory graph").trigger()
    graph = window.panels["graph"]
    qtbot.waitUntil(lambda: not graph._busy and any(n.memory_id == memory_id for n in graph.view.nodes),
                    timeout=30000)
    qtbot.mouseClick(graph.search, Qt.LeftButton)
    qtbot.keyClicks(graph.search, "orchestra")
    qtbot.keyClick(graph.search, Qt.Key_Return)
    qtbot.waitUntil(lambda: graph.selected is not None and graph.selected.memory_id == memory_id, timeout=30000)
    chosen_index, neighbours = graph.highlighted()
    assert graph.view.nodes[chosen_index].label == EDITED
    assert "cello" in {graph.view.nodes[i].label for i in neighbours}  # its entity, highlighted with it
    assert EDITED in graph.info.text()

    # delete it from the keyboard in Memories
    window.show_panel("memories")
    qtbot.waitUntil(lambda: memory_id in [m.id for m in memories.model.memories], timeout=20000)
    memories.select_memory(memory_id)
    memories.table.setFocus()
    qtbot.keyClick(memories.table, Qt.Key_Delete)
    qtbot.waitUntil(lambda: _memory(window, memory_id)["deleted_at"] is not None, timeout=20000)
    qtbot.waitUntil(lambda: "trash" in memories.message.text(), timeout=10000)
    qtbot.waitUntil(lambda: memory_id not in [m.id for m in memories.model.memories], timeout=20000)
    window.show_panel("graph")  # the graph lets it go too, and nothing stays selected in its place
    qtbot.waitUntil(lambda: not graph._busy and graph.view.index_of(f"m{memory_id}") is None, timeout=30000)
    assert graph.highlighted() == (None, set())

    # quit from the menu: the window and the store close, settings.json is left as it was
    settings_path = home / SETTINGS_FILENAME
    before = settings_path.read_text(encoding="utf-8")
    _menu_action(window, "File", "Quit Engram").trigger()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=20000)
    assert quits == [True] and services._db is None
    after = settings_path.read_text(encoding="utf-8")
    assert after == before
    assert json.loads(after)["chat_model"] == chosen
    again = Services.from_data_dir(home)  # the next start: the same model, the memory still in the trash
    try:
        assert again.settings.chat_model == chosen and onboarding_seen(home)
        assert again.db.scalar("SELECT statement FROM memories WHERE id = ? AND deleted_at IS NOT NULL",
                               (memory_id,)) == EDITED
        assert again.db.scalar("PRAGMA integrity_check") == "ok"
    finally:
        again.close()


def test_the_welcome_screen_is_shown_once(qtbot, tmp_path):
    from app.services.platform import this_machine
    from app.ui.onboarding import SEEN_KEY
    from core.config import load_settings
    from models.registry import CURATED
    home = tmp_path / "home"
    window = open_main_window(Services.from_data_dir(home))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.onboarding is not None and window.onboarding.isVisible(), timeout=10000)
    welcome = window.onboarding
    qtbot.waitUntil(lambda: "Recommended for" in welcome.model.text(), timeout=60000)  # a first speed probe
    text = welcome.keeps.text() + welcome.model.text()
    assert f"one file on {this_machine()}" in text and str(home / "engram.db") in text
    assert "delete" in text and "Memories" in text  # how to see and wipe it
    assert "Forget everything" in text and "backup" in text  # the wipe the app has, not a file to delete by hand
    named = [info for info in CURATED if info.name in welcome.model.text()]
    assert len(named) == 1 and (" GB download" in text or " MB download" in text)
    assert any(words in text for words in ("fits comfortably", "fits, but tightly", "is too big"))
    assert not (home / SETTINGS_FILENAME).exists()  # nothing is remembered until the screen is dismissed
    qtbot.mouseClick(welcome.start_button, Qt.LeftButton)
    assert not welcome.isVisible() and window.stack.currentWidget() is window.panels["models"]
    saved = json.loads((home / SETTINGS_FILENAME).read_text(encoding="utf-8"))
    assert saved[SEEN_KEY] is True and load_settings(home).chat_model == ""  # the one key, nothing else changed
    window.runner.shutdown(wait=True)
    again = open_main_window(Services.from_data_dir(home))
    qtbot.addWidget(again)
    again.show()
    qtbot.wait(300)
    assert again.onboarding is None  # started again: straight to the app
    again.runner.shutdown(wait=True)
