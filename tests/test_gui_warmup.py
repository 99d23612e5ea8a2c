"""The chat's models load from the moment the window is shown, not on the first turn: the real MiniLM embedder and
the real tiny MLX model, offscreen. A message sent during the load waits with words, then gets its reply."""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.services.wiring import Services  # noqa: E402
from app.ui.main_window import MainWindow  # noqa: E402
from core.config import GenerationSettings, Settings  # noqa: E402
from models.chat import ChatEngine  # noqa: E402

TURN_MS = 120_000


@pytest.fixture
def open_window(qtbot, tmp_path):
    """A window on a fresh store with `chat_model` chosen (not shown yet); closed the way the app closes it."""
    windows: list[MainWindow] = []

    def build(chat_model: str, embedder=None) -> MainWindow:
        settings = Settings().replace(chat_model=chat_model, generation=GenerationSettings(max_tokens=8))
        win = MainWindow(Services(settings=settings, data_dir=tmp_path / "home", _embedder=embedder))
        qtbot.addWidget(win)
        windows.append(win)
        return win
    yield build
    for win in windows:
        win.close()


def _wrap_load(monkeypatch, before):
    """ChatEngine.load with `before(folder)` run first on the loading thread; returns the folders it was asked for."""
    real_load, calls = ChatEngine.load, []

    def load(folder, **options):
        calls.append(folder)
        before(folder)
        return real_load(folder, **options)
    monkeypatch.setattr(ChatEngine, "load", staticmethod(load))
    return calls


def test_the_models_load_when_the_window_is_shown_before_any_turn(qtbot, open_window, tiny_model_dir):
    win = open_window(str(tiny_model_dir))
    services, panel = win.services, win.panels["chat"]
    qtbot.wait(100)  # a window not shown yet loads nothing
    assert not services.embedder_loaded and not services.chat_loaded()
    win.show()
    qtbot.waitUntil(lambda: services.embedder_loaded and services.chat_loaded(), timeout=TURN_MS)
    qtbot.waitUntil(lambda: panel.warmup.waiting_text() == "")
    assert panel.message_widgets() == [] and not panel.turns.busy  # no turn asked for them


def test_no_model_chosen_loads_nothing_until_one_is_chosen(qtbot, open_window, tiny_model_dir, embedder):
    win = open_window("", embedder)
    services, panel = win.services, win.panels["chat"]
    win.show()
    qtbot.waitUntil(panel.banner.isVisible)  # the way to Models: there is nothing to answer with
    assert panel.warmup.loading == {} and not services.chat_loaded()
    win.apply_settings(services.settings.replace(chat_model=str(tiny_model_dir)))  # as Models does when you choose
    qtbot.waitUntil(services.chat_loaded, timeout=TURN_MS)


def test_a_message_sent_while_the_model_loads_waits_with_words_then_gets_its_reply(qtbot, open_window, monkeypatch,
                                                                                   tiny_model_dir, embedder):
    loading, release = threading.Event(), threading.Event()
    calls = _wrap_load(monkeypatch, lambda _folder: (loading.set(), release.wait(60)))
    win = open_window(str(tiny_model_dir), embedder)
    panel = win.panels["chat"]
    try:
        win.show()
        qtbot.waitUntil(loading.is_set, timeout=TURN_MS)
        qtbot.keyClicks(panel.composer, "What do you know about tea?")
        qtbot.mouseClick(panel.send_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: len(panel.replies()) == 1)
        reply = panel.replies()[0]
        waiting = f"Loading {tiny_model_dir.name}… (first reply after it)"
        qtbot.waitUntil(lambda: reply.status.text() == waiting)
        assert reply.text == "" and panel.send_button.text() == "Stop"
        with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS):
            release.set()
    finally:
        release.set()  # a failed check must not leave the model lane waiting at close
    assert reply.text and reply.episode_id is not None and "Loading" not in reply.status.text()
    assert len(calls) == 1  # the turn took the engine the window had started loading


def test_a_model_that_will_not_load_is_explained_once_in_plain_words(qtbot, open_window, monkeypatch,
                                                                    tiny_model_dir, embedder):
    def broken(_folder):
        raise ValueError("Expected shape (64, 32) but received (64, 16)")
    calls = _wrap_load(monkeypatch, broken)
    win = open_window(str(tiny_model_dir), embedder)
    panel = win.panels["chat"]
    win.show()
    expected = f"Could not load {tiny_model_dir.name}: Expected shape (64, 32) but received (64, 16)."
    qtbot.waitUntil(lambda: panel.banner.isVisible() and panel.banner_text.text() == expected, timeout=TURN_MS)
    win.apply_settings(win.services.settings.replace(memory_dial="light"))  # the same model: not tried, nor said, again
    qtbot.wait(300)
    assert len(calls) == 1 and panel.banner.isVisible() and panel.banner_text.text() == expected
    assert "ValueError" not in panel.banner_text.text()
