"""The Models panel: registry with fit labels, first-start offer, download with progress and cancel, choose."""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("pytestqt")

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow, open_main_window  # noqa: E402
from core.config import load_settings  # noqa: E402
from models.download import ModelStore  # noqa: E402
from models.registry import CURATED, GB  # noqa: E402
from hubfake import FakeHub  # noqa: E402


@pytest.fixture
def window(qtbot, tmp_path):
    services = Services.from_data_dir(tmp_path / "home")
    win = MainWindow(services)
    qtbot.addWidget(win)
    yield win
    win.runner.shutdown(wait=True)


def _use_hub(window, hub):
    window.services.model_store = lambda: ModelStore(window.services.models_dir, total_ram=16 * GB, snapshot=hub)


def _panel(qtbot, window):
    panel = window.show_panel("models")
    qtbot.waitUntil(lambda: panel.table.rowCount() == len(CURATED), timeout=10000)
    return panel


def test_registry_rows_carry_fit_labels_and_a_first_start_offer(qtbot, window):
    panel = _panel(qtbot, window)
    fits = {panel.table.item(r, 6).text() for r in range(panel.table.rowCount())}
    assert fits <= {"fits", "tight", "won't fit"} and fits
    assert panel.banner.isVisible() or not panel.isVisible()
    assert panel.recommended.name in panel.banner.text()
    assert panel.selected_repo() == panel.recommended.repo_id


def test_first_start_opens_on_models_with_the_recommended_model(qtbot, tmp_path):
    win = open_main_window(Services.from_data_dir(tmp_path / "fresh"))
    qtbot.addWidget(win)
    win.show()
    panel = win.panels["models"]
    assert win.stack.currentWidget() is panel
    qtbot.waitUntil(lambda: panel.recommended is not None, timeout=10000)
    assert panel.banner.isVisible() and panel.recommended.name in panel.banner.text()
    from app.services.platform import this_machine
    assert f"Recommended for {this_machine()}" in panel.banner.text()
    win.runner.shutdown(wait=True)
    chosen = Services.from_data_dir(tmp_path / "chosen")
    chosen.settings = chosen.settings.replace(chat_model=CURATED[0].repo_id)
    win = open_main_window(chosen)
    qtbot.addWidget(win)
    assert win.stack.currentWidget() is win.panels["chat"] and "models" not in win.panels
    win.runner.shutdown(wait=True)


def test_download_shows_progress_installs_and_can_be_chosen(qtbot, window, tiny_model_dir):
    repo, other = CURATED[0].repo_id, CURATED[1].repo_id
    _use_hub(window, FakeHub(tiny_model_dir, repo))
    panel = _panel(qtbot, window)
    panel.select_repo(repo)
    progress = []
    panel.progress.valueChanged.connect(progress.append)
    with qtbot.waitSignal(panel.download_finished, timeout=60000) as done:
        panel.on_download()
    assert done.args == [True] and progress and max(progress) == 1000
    qtbot.waitUntil(lambda: repo in panel.installed, timeout=10000)
    assert "Installed" in panel.message.text()
    assert load_settings(window.services.data_dir).chat_model == repo  # the first model is ready to chat
    assert not panel.banner.isVisible()
    panel.select_repo(other)
    panel.on_use()  # not installed: refused, the choice stays
    assert "Download the model" in panel.message.text()
    panel.select_repo(repo)
    panel.on_use()
    assert load_settings(window.services.data_dir).chat_model == repo


def test_cancel_stops_the_download_and_installs_nothing(qtbot, window, tiny_model_dir):
    repo = CURATED[0].repo_id
    gate = threading.Event()
    _use_hub(window, FakeHub(tiny_model_dir, repo, gate=gate))
    panel = _panel(qtbot, window)
    panel.select_repo(repo)
    panel.on_download()
    qtbot.waitUntil(lambda: panel.buttons["cancel"].isEnabled(), timeout=5000)
    panel.on_cancel()
    with qtbot.waitSignal(panel.download_finished, timeout=30000) as done:
        gate.set()
    assert done.args == [False]
    assert window.services.model_store().installed() == []


def _add_folder_by_button(qtbot, panel, monkeypatch, folder):
    """Click "Add a model…" and pick `folder` in the folder dialog (the dialog itself is the platform's)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QFileDialog
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(folder)))
    with qtbot.waitSignal(panel.added, timeout=60000) as added:
        qtbot.mouseClick(panel.buttons["add"], Qt.LeftButton)
    return added.args[0]


def _row_of(panel, text):
    return next((r for r in range(panel.table.rowCount()) if panel.table.item(r, 0).text() == text), None)


def test_a_model_folder_added_by_button_is_listed_and_can_be_chosen(qtbot, window, tiny_model_dir, monkeypatch,
                                                                     tmp_path):
    import shutil

    from PySide6.QtCore import Qt
    panel = _panel(qtbot, window)
    assert _add_folder_by_button(qtbot, panel, monkeypatch, tiny_model_dir) is True
    qtbot.waitUntil(lambda: _row_of(panel, tiny_model_dir.name) is not None, timeout=10000)
    first = str(tiny_model_dir.resolve())
    assert load_settings(window.services.data_dir).chat_model == first  # the first model: ready to chat
    qtbot.waitUntil(lambda: panel.table.item(_row_of(panel, tiny_model_dir.name), 7).text() == "active",
                    timeout=10000)
    second = tmp_path / "second-model"
    shutil.copytree(tiny_model_dir, second)
    assert _add_folder_by_button(qtbot, panel, monkeypatch, second) is True
    qtbot.waitUntil(lambda: _row_of(panel, "second-model") is not None, timeout=10000)
    row = _row_of(panel, "second-model")
    assert panel.table.item(row, 7).text() == "folder"
    assert load_settings(window.services.data_dir).chat_model == first  # adding a second one changes nothing
    qtbot.mouseClick(panel.table.viewport(), Qt.LeftButton,
                     pos=panel.table.visualRect(panel.table.model().index(row, 0)).center())
    qtbot.mouseClick(panel.buttons["use"], Qt.LeftButton)
    assert load_settings(window.services.data_dir).chat_model == str(second.resolve())
    qtbot.waitUntil(lambda: panel.table.item(_row_of(panel, "second-model"), 7).text() == "active", timeout=10000)
    # remembered: the app started again lists both
    again = MainWindow(Services.from_data_dir(window.services.data_dir))
    qtbot.addWidget(again)
    other = again.show_panel("models")
    qtbot.waitUntil(lambda: None not in (_row_of(other, tiny_model_dir.name), _row_of(other, "second-model")),
                    timeout=10000)
    again.runner.shutdown(wait=True)


def test_a_folder_that_is_not_an_mlx_model_is_refused_in_words(qtbot, window, tmp_path, monkeypatch):
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "cat.jpg").write_bytes(b"\xff\xd8")
    panel = _panel(qtbot, window)
    rows = panel.table.rowCount()
    assert _add_folder_by_button(qtbot, panel, monkeypatch, photos) is False
    assert "not a model folder" in panel.message.text() and "Traceback" not in panel.message.text()
    assert panel.table.rowCount() == rows and window.services.model_store().installed() == []
    gguf_only = tmp_path / "gguf-only"
    gguf_only.mkdir()
    (gguf_only / "model-Q4_K_M.gguf").write_bytes(b"GGUF")
    assert _add_folder_by_button(qtbot, panel, monkeypatch, gguf_only) is False
    assert "GGUF" in panel.message.text()


def test_a_gguf_file_is_converted_with_progress_listed_and_chosen(qtbot, window, monkeypatch):
    """LM Studio and Jan users have GGUF files: "Add a GGUF file…" converts one to MLX on the spot."""
    pytest.importorskip("models.gguf")
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QFileDialog

    from core.errors import ModelError
    from models.testing_real import smollm2_gguf
    try:
        gguf = smollm2_gguf()
    except ModelError as exc:
        pytest.skip(str(exc))
    panel = _panel(qtbot, window)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(gguf), "GGUF (*.gguf)")))
    progress = []
    panel.progress.valueChanged.connect(progress.append)
    with qtbot.waitSignal(panel.added, timeout=300000) as added:
        qtbot.mouseClick(panel.buttons["add_gguf"], Qt.LeftButton)
    assert added.args == [True], panel.message.text()
    assert progress and max(progress) == 1000 and not panel.progress.isVisible()
    qtbot.waitUntil(lambda: _row_of(panel, gguf.stem) is not None, timeout=10000)
    assert panel.table.item(_row_of(panel, gguf.stem), 7).text() == "active"  # the first model: ready to chat
    chosen = load_settings(window.services.data_dir).chat_model
    assert window.services.model_store().resolve(chosen).is_dir() and gguf.is_file()  # the user's file stays


def test_a_file_that_is_not_gguf_is_refused_in_words(qtbot, window, monkeypatch, tmp_path):
    pytest.importorskip("models.gguf")
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QFileDialog
    fake = tmp_path / "holiday.gguf"
    fake.write_bytes(b"JFIF not a model")
    panel = _panel(qtbot, window)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(fake), "")))
    with qtbot.waitSignal(panel.added, timeout=60000) as added:
        qtbot.mouseClick(panel.buttons["add_gguf"], Qt.LeftButton)
    assert added.args == [False] and "not a GGUF model file" in panel.message.text()
    assert window.services.model_store().installed() == []
