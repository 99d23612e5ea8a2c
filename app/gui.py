"""Starts the desktop app (the window itself is built in app/ui)."""
from __future__ import annotations


def run_gui() -> int:
    from app.ui.main_window import launch  # deferred: Qt loads only when the window is wanted
    return launch()
