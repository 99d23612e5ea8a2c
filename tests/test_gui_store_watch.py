"""A memory added by another process (`engram memory add` in a terminal beside the open window; here a second
connection, as the CLI's) shows in Memories and in the memory graph by itself, with nothing clicked; a hidden panel
shows it when it is shown. One look at the store's data_version serves the whole window (not a timer per panel)."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QTimer  # noqa: E402

from app.ui import chat_memory_watch  # noqa: E402
from core.store import jobs  # noqa: E402
from core.store.memories import add_memory  # noqa: E402

FAST_MS = 200  # the poll's interval here: the behaviour is the app's, only quicker to wait for


@pytest.fixture(autouse=True)
def _quick_poll(monkeypatch):
    monkeypatch.setattr(chat_memory_watch, "POLL_MS", FAST_MS)


def _statements(panel) -> list[str]:
    return panel.simple.statements()


def _labels(graph) -> set[str]:
    return {node.label for node in graph.view.nodes}


def _watching(qtbot, window) -> None:
    qtbot.waitUntil(lambda: window.store_watch.version is not None, timeout=10000)  # its first look was taken


def test_one_poll_serves_the_whole_window(qtbot, window):
    for key in ("chat", "memories", "graph"):
        window.show_panel(key)
    _watching(qtbot, window)
    polls = [t for t in window.findChildren(QTimer) if t.interval() == FAST_MS and t.isActive()]
    assert polls == [window.store_watch.timer]
    assert window.panels["chat"].memory_watch.store is window.store_watch


def test_memories_and_the_graph_show_a_memory_another_process_added(qtbot, window, window_db):
    memories = window.show_panel("memories")
    _watching(qtbot, window)
    qtbot.waitUntil(lambda: memories.simple.memories is not None, timeout=10000)
    add_memory(window_db, "User plays the cello")  # as `engram memory add` would, while the window is open
    qtbot.waitUntil(lambda: "You play the cello" in _statements(memories), timeout=10000)  # nothing clicked
    graph = window.show_panel("graph")
    qtbot.waitUntil(lambda: "User plays the cello" in _labels(graph) and not graph._busy, timeout=20000)
    add_memory(window_db, "User owns a red bicycle")
    qtbot.waitUntil(lambda: "User owns a red bicycle" in _labels(graph), timeout=20000)


def test_hidden_panels_wait_and_catch_up_when_shown(qtbot, window, window_db):
    memories = window.show_panel("memories")
    graph = window.show_panel("graph")
    _watching(qtbot, window)
    qtbot.waitUntil(lambda: not graph._busy, timeout=20000)
    add_memory(window_db, "User lives in Lisbon")  # a first picture, so a hidden graph is not redrawn
    qtbot.waitUntil(lambda: "User lives in Lisbon" in _labels(graph) and not graph._busy, timeout=20000)
    window.show_panel("chat")  # both hidden now
    loads: list[None] = []
    memories.loaded.connect(lambda: loads.append(None))
    with qtbot.waitSignal(window.store_watch.moved, timeout=10000):
        add_memory(window_db, "User drinks oat milk")
    qtbot.wait(3 * FAST_MS)
    assert graph._stale and "User drinks oat milk" not in _labels(graph)  # no layout for a hidden panel
    assert loads == []  # nor a read: Memories re-reads when it is shown
    with qtbot.waitSignal(memories.loaded, timeout=10000):
        window.show_panel("memories")
    assert "You drink oat milk" in _statements(memories)
    window.show_panel("graph")
    qtbot.waitUntil(lambda: "User drinks oat milk" in _labels(graph), timeout=20000)


def test_a_commit_that_changed_no_memory_keeps_the_selection(qtbot, window, window_db):
    """An idle-time job's progress is a commit too: the table is not reset under the user's selection for it."""
    first = add_memory(window_db, "User plays the cello")
    add_memory(window_db, "User owns a red bicycle")
    memories = window.show_panel("memories")
    memories.set_view("full", remember=False)
    _watching(qtbot, window)
    qtbot.waitUntil(lambda: memories.model.rowCount() == 2, timeout=10000)
    assert memories.select_memory(first) and memories.selected_ids() == [first]
    with qtbot.waitSignal(memories.loaded, timeout=10000):
        jobs.enqueue(window_db, "reflection")  # a commit by another connection that touches no memory
    assert memories.selected_ids() == [first]
