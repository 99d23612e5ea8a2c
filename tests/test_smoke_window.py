"""`engram --smoke` (issue 36.8): the real main window opened, checked on screen with the app menu's roles, closed
with a status. The Mac workflow runs it in the bundle on cocoa and takes a screenshot; here it runs offscreen."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow

from app.ui.smoke import run_smoke, smoke_problems

ROOT = Path(__file__).resolve().parent.parent


def test_smoke_opens_the_window_says_ok_and_never_touches_the_users_folder(tmp_path):
    home = tmp_path / "engram-home"
    env = {**os.environ, "ENGRAM_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-m", "app", "--smoke"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("smoke: shown, window ") and "on offscreen" in lines[0]
    assert lines[-1].startswith("smoke: OK ") and "app menu: Quit, Settings…, About" in lines[-1]
    assert "Traceback" not in done.stderr
    assert not home.exists()  # a temporary store, never the user's


def test_a_window_missing_an_app_menu_role_or_not_shown_is_a_failure(qtbot):
    window = QMainWindow()
    qtbot.addWidget(window)
    quit_action = QAction("Quit", window)
    quit_action.setMenuRole(QAction.QuitRole)
    window.menuBar().addMenu("&File").addAction(quit_action)
    assert smoke_problems(window).problems == ["the main window is not visible",
                                               "the menus have no Settings…, About action"]
    with qtbot.waitExposed(window):
        window.show()
    assert smoke_problems(window).problems == ["the menus have no Settings…, About action"]


def test_smoke_on_an_older_mlx_fails_in_one_line(monkeypatch, engram_home):
    import mlx.core as mx
    monkeypatch.delattr(mx, "new_thread_local_stream")
    monkeypatch.setattr(mx, "__version__", "0.29.0")
    out = io.StringIO()
    assert run_smoke(out=out) == 1
    assert out.getvalue().splitlines() == [
        "smoke: FAIL Engram needs MLX 0.32.2 or newer; this is 0.29.0 (it has no mx.new_thread_local_stream) — "
        "update it: pip install -U \"mlx>=0.32.2\" \"mlx-lm>=0.32.2\""]
