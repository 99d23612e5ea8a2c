"""`engram --smoke`: open the real main window on this screen, check it is shown and its menus carry the roles the
Mac's application menu is made from, print one line, and quit with 0 or 1 (issue 36.8).

Unlike `--self-check`, which starts Qt offscreen, this uses the platform's own plugin (cocoa on a Mac), so the
release workflow sees a real window and menu bar; it takes a screenshot while the window is held open. It runs on a
temporary data folder: the user's own store is never opened.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from PySide6.QtCore import QCoreApplication, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication

# The actions Qt moves into a Mac's application menu, by role (app/ui/menus.py), and their menu words there
APP_MENU_ROLES = {QAction.MenuRole.QuitRole: "Quit", QAction.MenuRole.PreferencesRole: "Settings…",
                  QAction.MenuRole.AboutRole: "About"}
SETTLE_MS = 500  # after show(): the platform maps and exposes the window in its own event loop turns
GIVE_UP_MS = 60_000  # a window never exposed by then is a failure, not a hang


@dataclass
class SmokeResult:
    problems: list[str] = field(default_factory=list)
    summary: str = ""


def smoke_problems(window: Any) -> SmokeResult:
    """What is wrong with the shown window: not visible, not exposed on the screen, an app-menu role missing."""
    result = SmokeResult()
    handle = window.windowHandle()
    if not window.isVisible():
        result.problems.append("the main window is not visible")
    elif handle is None or not handle.isExposed():
        result.problems.append("the main window is not exposed on the screen")
    roles = {action.menuRole() for action in _menu_actions(window.menuBar())}
    missing = [words for role, words in APP_MENU_ROLES.items() if role not in roles]
    if missing:
        result.problems.append(f"the menus have no {', '.join(missing)} action")
    if QApplication.platformName() == "cocoa" and not window.menuBar().isNativeMenuBar():
        result.problems.append("the menu bar is not the Mac's native one")
    size = window.size()
    result.summary = (f"window {size.width()}×{size.height()} on {QApplication.platformName()}, "
                      f"app menu: {', '.join(APP_MENU_ROLES.values())}")
    return result


def _menu_actions(bar: Any) -> list[QAction]:
    found, pending = [], list(bar.actions())
    while pending:
        action = pending.pop()
        found.append(action)
        if action.menu() is not None:
            pending += action.menu().actions()
    return found


def run_smoke(hold_seconds: float = 0.0, out: TextIO | None = None) -> int:
    """Open the window on a temporary store, check it once it is on screen, keep it up `hold_seconds` (for a
    screenshot), close it; 0 when every check passed."""
    out = out or sys.stdout
    from app.ui.main_window import open_main_window
    from models.mlx_requirements import mlx_problem
    app = QApplication.instance() or QApplication([sys.argv[0]])
    problem = mlx_problem()
    if problem:
        print(f"smoke: FAIL {problem}", file=out)
        return 1
    with tempfile.TemporaryDirectory(prefix="engram-smoke-") as tmp:
        from app.services.wiring import Services
        window = open_main_window(Services.from_data_dir(Path(tmp) / "data"))
        window.show()
        result = _checked_when_exposed(app, window, hold_seconds, out)
        window.close()  # the usual close: lanes stop, the store closes, before the folder goes
        app.processEvents()
    if result.problems:
        print(f"smoke: FAIL {'; '.join(result.problems)}", file=out)
        return 1
    print(f"smoke: OK {result.summary}", file=out, flush=True)
    return 0


def _checked_when_exposed(app: QCoreApplication, window: Any, hold_seconds: float, out: TextIO) -> SmokeResult:
    """Run the event loop until the window is exposed (or GIVE_UP_MS), check it, hold it, then return."""
    result = SmokeResult(problems=["the window was never shown"])
    waited = {"ms": 0}

    def check() -> None:
        handle = window.windowHandle()
        if (handle is None or not handle.isExposed()) and waited["ms"] < GIVE_UP_MS:
            waited["ms"] += SETTLE_MS
            QTimer.singleShot(SETTLE_MS, check)
            return
        found = smoke_problems(window)
        result.problems, result.summary = found.problems, found.summary
        if not found.problems:  # said before the hold, so a workflow knows when to take its screenshot
            print(f"smoke: shown, {found.summary}", file=out, flush=True)
        QTimer.singleShot(int(hold_seconds * 1000), app.quit)

    QTimer.singleShot(SETTLE_MS, check)
    app.exec()
    return result
