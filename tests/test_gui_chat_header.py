"""The chat header's model picker (issue 14, Chat): its arrow lists every usable model as the Models panel does;
choosing one writes only `chat_model` to settings.json and the chat loads it in the background — offscreen, two
real tiny MLX model folders added as a user adds them, the real MiniLM embedder."""
from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QPoint, Qt, QTimer  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.config import SETTINGS_FILENAME, update_settings  # noqa: E402


def _click_in_menu(qtbot, menu, name: str, seen: list) -> None:
    """While the menu is open (its own event loop), click the model called `name`."""
    action = next(a for a in menu.actions() if a.text() == name)
    seen.append([a.text() for a in menu.actions() if a.isCheckable() and a.isChecked()])
    qtbot.mouseClick(menu, Qt.LeftButton, pos=menu.actionGeometry(action).center())


def test_the_header_lists_the_usable_models_and_switches_to_one(qtbot, tmp_path, tiny_model_dir, embedder):
    home = tmp_path / "home"
    other = shutil.copytree(tiny_model_dir, tmp_path / "tiny-other")
    services = Services.from_data_dir(home)
    services._embedder = embedder
    store = services.model_store()
    store.add_folder(tiny_model_dir)
    store.add_folder(other)  # both as "Add a model…" adds a folder
    services.settings = update_settings(home, {"chat_model": str(tiny_model_dir.resolve()), "memory_dial": "light",
                                               "a_key_from_a_newer_engram": 7})
    before = json.loads((home / SETTINGS_FILENAME).read_text(encoding="utf-8"))
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.show()
    panel = window.show_panel("chat")
    header = panel.header
    qtbot.waitUntil(lambda: len(header.choices) == 2, timeout=20000)
    assert [c.name for c in header.choices] == [tiny_model_dir.name, "tiny-other"]
    assert panel.model_button.text() == f"Model: {tiny_model_dir.name}"
    qtbot.waitUntil(services.chat_loaded, timeout=60000)  # the first model loads from the window's show

    seen: list = []
    QTimer.singleShot(300, lambda: _click_in_menu(qtbot, header.menu, "tiny-other", seen))
    arrow = QPoint(panel.model_button.width() - 4, panel.model_button.height() // 2)  # the button's menu arrow
    qtbot.mouseClick(panel.model_button, Qt.LeftButton, pos=arrow)
    assert seen == [[tiny_model_dir.name]]  # the active one was ticked
    qtbot.waitUntil(lambda: panel.model_button.text() == "Model: tiny-other", timeout=10000)

    after = json.loads((home / SETTINGS_FILENAME).read_text(encoding="utf-8"))
    assert after == {**before, "chat_model": str(other.resolve())}  # only chat_model changed on disk
    assert services.settings.chat_model == str(other.resolve())
    assert window.stack.currentWidget() is panel  # the arrow switches; only the name opens Models
    qtbot.waitUntil(services.chat_loaded, timeout=60000)  # the new model loaded in the background
    assert not panel.banner.isVisible()
    assert [a.text() for a in header.menu.actions() if a.isCheckable() and a.isChecked()] == ["tiny-other"]
    panel.shutdown()
    window.runner.shutdown(wait=True)
    services.close()


def test_a_long_model_name_leaves_the_title_room_and_a_long_title_ends_in_an_ellipsis(qtbot, tmp_path,
                                                                                      tiny_model_dir, embedder):
    """Seen in a real window: "SmolLM2-135M-Instruct.Q4_1-…-q32" took the header's width and cut the title to
    "What instrur" mid-word."""
    home = tmp_path / "home"
    long_name = tmp_path / ("SmolLM2-135M-Instruct.Q4_1-converted-from-gguf-" + "x" * 40 + "-q32")
    shutil.copytree(tiny_model_dir, long_name)
    services = Services.from_data_dir(home)
    services._embedder = embedder
    services.model_store().add_folder(long_name)
    services.settings = update_settings(home, {"chat_model": str(long_name.resolve())})
    window = MainWindow(services)
    qtbot.addWidget(window)
    window.resize(1100, 700)
    window.show()
    panel = window.show_panel("chat")
    title = "What instrument is my sister learning these days, and since when?"
    panel.title.setText(title)
    qtbot.wait(50)
    button = panel.model_button
    assert "…" in button.text() and long_name.name in button.toolTip()
    assert button.width() < 260 and panel.title.width() > 170  # the title keeps a good part of the row
    assert panel.title.text() == title  # the whole title, for whoever reads it
    shown = panel.title.shown_text()
    assert shown == title or (shown.endswith("…") and title.startswith(shown[:-1]) and len(shown) > 15)
    assert panel.title.fontMetrics().horizontalAdvance(shown) <= panel.title.width()
