"""Helpers for GUI tests that look into the store behind a window."""
from __future__ import annotations

from typing import Any, Callable


def on_db_lane(owner: Any, fn: Callable[..., Any], *args: Any, timeout: float = 60) -> Any:
    """fn(db, *args) on the db lane of `owner` (a window or a panel), waited for.

    The window's connection belongs to that lane: the test thread using it while a panel's load runs there
    would be two threads on one apsw connection.
    """
    return owner.runner.submit("db", fn, owner.services.db, *args).result(timeout=timeout)


def type_and_send(qtbot: Any, panel: Any, text: str, timeout_ms: int) -> Any:
    """Click the composer, type, Return, as a person does; the reply once it is stored."""
    from PySide6.QtCore import Qt
    with qtbot.waitSignal(panel.reply_finished, timeout=timeout_ms) as finished:
        qtbot.mouseClick(panel.composer, Qt.LeftButton)
        qtbot.keyClicks(panel.composer, text)
        qtbot.keyClick(panel.composer, Qt.Key_Return)
    return finished.args[0]
