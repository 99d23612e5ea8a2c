"""Helpers for GUI tests that look into the store behind a window."""
from __future__ import annotations

from typing import Any, Callable


def on_db_lane(owner: Any, fn: Callable[..., Any], *args: Any, timeout: float = 60) -> Any:
    """fn(db, *args) on the db lane of `owner` (a window or a panel), waited for.

    The window's connection belongs to that lane: the test thread using it while a panel's load runs there
    would be two threads on one apsw connection.
    """
    return owner.runner.submit("db", fn, owner.services.db, *args).result(timeout=timeout)
