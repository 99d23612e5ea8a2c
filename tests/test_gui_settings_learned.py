"""Settings shows what forgetting learnt from the user's restores, from how many signals, and resets it."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from core.memory import learned  # noqa: E402


def test_settings_show_the_learnt_weights_and_reset_them(qtbot, window, window_db):
    learned.save(window_db, learned.LearnedRetention(alpha=2.5, beta=3.25, gamma=4.0, bias=-2.75, kept_signals=3,
                                                     forgot_signals=12))
    panel = window.show_panel("settings")
    qtbot.waitUntil(lambda: "3 restores" in panel.learned_label.text(), timeout=10000)
    assert "12 forgettings left alone" in panel.learned_label.text()
    assert "relevance 3.25 (default 2.00)" in panel.learned_label.text()
    qtbot.mouseClick(panel.reset_learned_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.learned_label.text().startswith("Nothing learnt yet"), timeout=10000)
    assert learned.load(window_db, window.services.settings) == learned.defaults(window.services.settings)
