"""The Models panel: registry with fit pills, the recommended row, first-start offer, download with progress, pause,
resume and cancel, choose."""
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
def window(qtbot, tmp_path, monkeypatch):
    # a Mac's GPU, whatever this machine is: the recommendation's speed part is tested in test_machine_speed.py
    monkeypatch.setattr("models.speed.machine_key", lambda: "Darwin arm64 8 cpus, mlx on Device(gpu, 0)")
    monkeypatch.setattr("models.speed.probe_bandwidth", lambda: 90e9)
    services = Services.from_data_dir(tmp_path / "home")
    win = MainWindow(services)
    qtbot.addWidget(win)
    yield win
    win.runner.shutdown(wait=True)


def _use_hub(window, hub):
    window.services.model_store = lambda: ModelStore(window.services.models_dir, total_ram=16 * GB, hub=hub,
                                                     sleep=lambda seconds: None)


def _panel(qtbot, window):
    panel = window.show_panel("models")
    qtbot.waitUntil(lambda: panel.table.rowCount() == len(CURATED), timeout=10000)
    return panel


def test_registry_rows_carry_fit_labels_and_a_first_start_offer(qtbot, window):
    panel = _panel(qtbot, window)
    fits = {panel.table.item(r, 6).text() for r in range(panel.table.rowCount())}
    assert fits <= {"fits", "tight", "too big"} and fits
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
    assert "“Add a GGUF file…”" in panel.banner.text()  # the other way in, on this machine with no hub access
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
    # a folder on disk is no download: the column says its size, whichever kind of row
    assert panel.table.horizontalHeaderItem(3).text() == "Size"
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
    assert panel.table.item(_row_of(panel, gguf.stem), 2).text() == "135M"  # its parameters, as curated rows say
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


def test_a_gguf_that_crashes_the_reader_is_refused_and_the_window_lives_on(qtbot, window, monkeypatch, tmp_path):
    """MLX's GGUF reader segfaults on a tensor count of 2**40; the conversion runs in a worker process, whose header
    check (models.gguf_header) now refuses the file before MLX reads it, and the panel says it could not be read."""
    pytest.importorskip("models.gguf")
    import struct

    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QFileDialog
    hostile = tmp_path / "free-model.gguf"
    hostile.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 2 ** 40, 0))
    panel = _panel(qtbot, window)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(hostile), "")))
    with qtbot.waitSignal(panel.added, timeout=60000) as added:
        qtbot.mouseClick(panel.buttons["add_gguf"], Qt.LeftButton)
    assert added.args == [False]
    assert "free-model.gguf could not be read as GGUF: the file is damaged" in panel.message.text()
    assert window.services.model_store().installed() == [] and panel.buttons["add_gguf"].isEnabled()


def test_fit_pills_follow_the_budget_and_the_recommended_row_is_marked(qtbot, window, monkeypatch):
    """An 8 GB Mac's GPU working set (a recorded mx.device_info() figure): Qwen3-8B is too big there, though it
    would fit 8 GB of RAM by the old measure; the recommended Qwen3-4B is marked."""
    from models.budget import GPU_WORKING_SET, MemoryBudget
    monkeypatch.setattr("models.budget.memory_budget", lambda *a, **k: MemoryBudget(5726633984, GPU_WORKING_SET))
    panel = _panel(qtbot, window)
    verdicts = {panel.table.item(r, 0).text(): panel.table.item(r, 6).text() for r in range(panel.table.rowCount())}
    assert verdicts["Qwen3-8B-4bit"] == "too big" and verdicts["Qwen3-4B-4bit"] == "fits"
    marked = [panel.table.item(r, 0).text() for r in range(panel.table.rowCount())
              if "Recommended" in panel.table.item(r, 7).text()]
    assert marked == ["Qwen3-4B-4bit"]
    assert "what the GPU may use, 5.3 GB of" in panel.budget_label.text()
    from app.ui.fit_pill import FitPillDelegate
    assert isinstance(panel.table.itemDelegateForColumn(6), FitPillDelegate)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_pill_text_reads_on_its_fill_in_light_and_dark(qtbot, scheme):
    from app.ui.fit_pill import pill_colours, pill_html
    from app.ui.theme import DARK, LIGHT, build_palette, contrast_ratio
    palette = build_palette(LIGHT if scheme == "light" else DARK)
    colours = {verdict: pill_colours(verdict, palette) for verdict in ("fits", "tight", "too big")}
    for text, fill in colours.values():
        assert contrast_ratio(text, fill) >= 4.5
    assert len({text.name() for text, _ in colours.values()}) == 3  # three verdicts, three colours
    assert colours["fits"][0].name() in pill_html("fits", palette)


def test_pause_keeps_what_was_fetched_and_resume_finishes_it(qtbot, window, tiny_model_dir):
    from PySide6.QtCore import Qt
    repo = CURATED[0].repo_id
    hold = threading.Event()
    hub = FakeHub(tiny_model_dir, repo, hold=hold, chunk_size=1024)
    _use_hub(window, hub)
    panel = _panel(qtbot, window)
    panel.select_repo(repo)
    qtbot.mouseClick(panel.buttons["download"], Qt.LeftButton)
    qtbot.waitUntil(lambda: hub.served_bytes > 0, timeout=10000)  # the first bytes are in
    qtbot.mouseClick(panel.buttons["pause"], Qt.LeftButton)
    with qtbot.waitSignal(panel.download_finished, timeout=30000) as done:
        hold.set()
    assert done.args == [False] and "Paused at" in panel.message.text()
    assert not panel.buttons["resume"].isHidden() and panel.buttons["resume"].isEnabled()
    assert panel.buttons["cancel"].isEnabled() and panel.buttons["pause"].isHidden()
    fetched = hub.served_bytes
    assert 0 < fetched < hub.total_bytes() and window.services.model_store().installed() == []
    with qtbot.waitSignal(panel.download_finished, timeout=60000) as done:
        qtbot.mouseClick(panel.buttons["resume"], Qt.LeftButton)
    assert done.args == [True], panel.message.text()
    assert hub.served_bytes == hub.total_bytes()  # resumed: nothing fetched twice
    assert [m.repo_id for m in window.services.model_store().installed()] == [repo]
    assert not panel.buttons["pause"].isHidden() and panel.buttons["resume"].isHidden()


def test_cancel_after_pause_removes_the_partial_files(qtbot, window, tiny_model_dir):
    from PySide6.QtCore import Qt

    from models.download import STAGING, folder_name
    repo = CURATED[0].repo_id
    gate = threading.Event()
    _use_hub(window, FakeHub(tiny_model_dir, repo, gate=gate, chunk_size=1024))
    panel = _panel(qtbot, window)
    panel.select_repo(repo)
    panel.on_download()
    qtbot.waitUntil(lambda: panel.buttons["pause"].isEnabled(), timeout=5000)
    panel.on_pause()
    with qtbot.waitSignal(panel.download_finished, timeout=30000):
        gate.set()
    staging = window.services.models_dir / STAGING / folder_name(repo)
    assert staging.is_dir()
    qtbot.mouseClick(panel.buttons["cancel"], Qt.LeftButton)
    qtbot.waitUntil(lambda: not staging.exists(), timeout=10000)
    qtbot.waitUntil(lambda: "partial files were removed" in panel.message.text(), timeout=5000)
    assert panel.buttons["resume"].isHidden() and panel.buttons["download"].isEnabled()


def test_the_welcome_screen_shows_the_recommended_model_with_its_fit_pill(qtbot):
    """Onboarding's recommendation, against a recorded 16 GB Mac's GPU working set."""
    from app.ui.fit_pill import pill_colours
    from app.ui.onboarding import model_text
    from models.budget import AVAILABLE_RAM, GPU_WORKING_SET, MemoryBudget
    from models.registry import default_model, find_model
    mac = MemoryBudget(11453251584, GPU_WORKING_SET)
    text = model_text(default_model(mac.bytes), mac, "this Mac")
    assert "Qwen3-8B-4bit" in text and "what the GPU may use, 10.7 GB of this Mac's memory" in text
    assert pill_colours("fits")[0].name() in text and "fits comfortably" in text
    small = MemoryBudget(3 * GB, AVAILABLE_RAM)
    text = model_text(find_model("Qwen3-8B-4bit"), small, "this computer")
    assert "is too big" in text and pill_colours("too big")[0].name() in text
    assert "3.0 GB free of this computer's memory" in text


def test_the_welcome_screen_says_its_pace_in_words(qtbot):
    """A pace that rounds to one is "1 token a second" (a fresh window under Xvfb said "1 tokens")."""
    from app.ui.onboarding import model_text
    from models.budget import AVAILABLE_RAM, MemoryBudget
    from models.registry import find_model

    class Pace:
        def __init__(self, pace: float) -> None:
            self.pace = pace

        def model_pace(self, _info) -> float:
            return self.pace
    budget, model = MemoryBudget(16 * GB, AVAILABLE_RAM), find_model("Qwen3-0.6B-4bit")
    assert "writes about 1 token a second." in model_text(model, budget, "this computer", speed=Pace(1.2))
    assert "writes about 3 tokens a second." in model_text(model, budget, "this computer", speed=Pace(3.1))


def test_a_dropped_connection_is_said_and_the_download_goes_on(qtbot, window, tiny_model_dir):
    repo = CURATED[0].repo_id
    _use_hub(window, FakeHub(tiny_model_dir, repo, flaky=2))
    panel = _panel(qtbot, window)
    said = []
    shown = panel._show_retry
    panel._show_retry = lambda seconds: (said.append(seconds), shown(seconds))
    panel.select_repo(repo)
    with qtbot.waitSignal(panel.download_finished, timeout=60000) as done:
        panel.on_download()
    assert done.args == [True] and said == [1.0, 2.0]
    assert "Installed" in panel.message.text()
