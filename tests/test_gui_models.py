"""The Models panel: registry with fit labels, first-start offer, download with progress and cancel, choose."""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("pytestqt")

from app.services import Services  # noqa: E402
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
    assert "Recommended for this Mac" in panel.banner.text()
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
