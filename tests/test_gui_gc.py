"""Garbage cycles holding Qt objects are collected on the GUI thread, never on a worker lane."""
from __future__ import annotations

import gc
import threading

import pytest

from app.ui.gc import generation_due

pytest.importorskip("pytestqt")


def test_generation_due_follows_the_interpreters_rule():
    thresholds = (700, 10, 10)
    assert generation_due((700, 0, 0), thresholds) is None  # not past the first threshold yet
    assert generation_due((701, 3, 0), thresholds) == 0
    assert generation_due((701, 11, 0), thresholds) == 1
    assert generation_due((701, 3, 11), thresholds) == 2  # the oldest generation past its own threshold
    assert generation_due((5000, 50, 50), (0, 10, 10)) is None  # a threshold of 0 turns collection off


class _Cycle:
    """A garbage cycle that holds a Qt object, and notes the thread it is finally freed on."""

    def __init__(self, freed_on: list[str]) -> None:
        from PySide6.QtCore import QObject
        self.me = self
        self.qt_object = QObject()
        self.freed_on = freed_on

    def __del__(self) -> None:
        self.freed_on.append(threading.current_thread().name)


def test_a_cycle_with_a_qt_object_is_freed_on_the_gui_thread(qtbot):
    from app.ui.gc import GuiThreadCollector
    freed_on: list[str] = []
    collector = GuiThreadCollector(interval_ms=20).start()
    try:
        assert not gc.isenabled()
        _Cycle(freed_on)  # garbage at once: only a collection frees it

        kept: list = []

        def allocate() -> None:  # enough live container allocations to trip every threshold many times over
            kept.extend([] for _ in range(200_000))
        worker = threading.Thread(target=allocate, name="lane")
        worker.start()
        worker.join()
        assert freed_on == []  # the worker's allocations did not collect it
        qtbot.waitUntil(lambda: bool(freed_on), timeout=5000)  # the GUI thread's timer collects it
        assert freed_on == [threading.main_thread().name]
    finally:
        collector.stop()


def test_stop_gives_collection_back_as_it_was(qapp):
    from app.ui.gc import GuiThreadCollector
    was_enabled = gc.isenabled()
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            collector = GuiThreadCollector().start()
            assert not gc.isenabled()
            collector.stop()
            assert gc.isenabled() == enabled
    finally:
        gc.enable() if was_enabled else gc.disable()
