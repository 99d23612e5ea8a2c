"""PySide6 6.12.0 on Python 3.11 drops a reference to None on every call of a void Qt method and to True on
every signal emit; once either count reaches zero the interpreter aborts ("Fatal Python error: none_dealloc" /
"bool_dealloc"). A long session (a streamed reply delivers one signal per chunk; a plot redraw calls dozens of
void methods) would crash the app. 6.11.3 is clean. Python 3.12+ makes None and True immortal, which hides it.
This test fails on a binding with the bug, so CI says so rather than a user's crash."""
from __future__ import annotations

import ctypes
import sys

import pytest

pytest.importorskip("pytestqt")

import PySide6  # noqa: E402
from PySide6.QtCore import QObject, Signal  # noqa: E402
from PySide6.QtWidgets import QLabel  # noqa: E402

CALLS = 200
KNOWN_BAD = PySide6.__version__ == "6.12.0" and sys.version_info < (3, 12)


def _give_back(obj: object, count: int) -> None:
    for _ in range(max(0, count)):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


class _Emitter(QObject):
    fired = Signal(object)


@pytest.mark.xfail(KNOWN_BAD, strict=True, reason="PySide6 6.12.0 refcount bug: pin PySide6-Essentials<6.12")
def test_qt_calls_and_signals_keep_none_and_true_alive(qtbot):
    label = QLabel("x")
    qtbot.addWidget(label)
    emitter = _Emitter()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(CALLS):
        label.update()  # a void method
        emitter.fired.emit(emitter)
    lost_none = none_before - sys.getrefcount(None)
    lost_true = true_before - sys.getrefcount(True)
    _give_back(None, lost_none)  # undo this test's own damage, so the rest of the run is not put at risk
    _give_back(True, lost_true)
    assert lost_none < CALLS // 10 and lost_true < CALLS // 10, (lost_none, lost_true)
