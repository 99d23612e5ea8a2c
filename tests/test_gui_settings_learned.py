"""Settings shows what forgetting learnt from the user's restores, silences and the memories their replies used (how
many of each), and resets it."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from core.memory import hebbian, learned  # noqa: E402
from core.store import turns  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from core.store.memories import add_memory  # noqa: E402


def test_settings_show_the_learnt_weights_and_reset_them(qtbot, window, window_db):
    learned.save(window_db, learned.LearnedRetention(alpha=2.5, beta=3.25, gamma=4.0, bias=-2.75, kept_signals=3,
                                                     forgot_signals=12))
    reply = add_episode(window_db, "Where does my sister live now?", "Near the river, you told me.")
    sister = add_memory(window_db, "The user's sister moved near the river.")
    turns.record_used(window_db, reply, [(sister, 0.8, False)])  # what Assistant.finish records of a reply
    hebbian.touch(window_db, [sister])
    panel = window.show_panel("settings")
    qtbot.waitUntil(lambda: "3 restores" in panel.learned_label.text(), timeout=10000)
    assert "12 forgettings left alone and 1 memory or turn your replies used" in panel.learned_label.text()
    assert "relevance 3.25 (default 2.00)" in panel.learned_label.text()
    qtbot.mouseClick(panel.reset_learned_button, Qt.LeftButton)
    # the weights are back to their defaults; the reply's use still steers preference, and the line says so
    qtbot.waitUntil(lambda: panel.learned_label.text().startswith("No weight learnt yet"), timeout=10000)
    assert "1 memory or turn your replies used" in panel.learned_label.text()
    assert learned.load(window_db, window.services.settings) == learned.defaults(window.services.settings)
