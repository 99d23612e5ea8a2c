"""Starts the desktop app (the window itself is built in app/ui)."""
from __future__ import annotations

import sys


def run_gui() -> int:
    try:
        from app.ui.main_window import launch
    except ImportError as exc:
        if "app.ui.main_window" not in str(exc):
            raise
        print("The Engram window is not part of this build yet; see `engram --help` for the command line.",
              file=sys.stderr)
        return 2
    return launch()
