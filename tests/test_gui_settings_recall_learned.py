"""Settings shows what recall learnt from the memories removed, pinned and rated, from how many, and resets it."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from core.memory import recall_learning  # noqa: E402


def test_settings_show_the_learnt_recall_blend_and_reset_it(qtbot, window, window_db):
    recall_learning.save(window_db, recall_learning.RecallBlend(weights=(0.25, -0.5, 0.0, 0.0, 0.0), vetoes=7,
                                                                rated_down=2))
    panel = window.show_panel("settings")
    qtbot.waitUntil(lambda: "7 memories removed" in panel.recall_learned_label.text(), timeout=10000)
    assert "2 thumbs down" in panel.recall_learned_label.text()
    assert ("it now brings up memories close in meaning to your message more readily; memories sharing words with "
            "your message less readily.") in panel.recall_learned_label.text()  # words a person reads (issue 38)
    assert "×" not in panel.recall_learned_label.text()
    assert panel.reset_recall_button.isVisible()
    qtbot.mouseClick(panel.reset_recall_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.recall_learned_label.text().startswith("Nothing learnt yet"), timeout=10000)
    assert recall_learning.load(window_db).weights == (0.0,) * len(recall_learning.TERMS)
    assert recall_learning.effective(window_db, window.services.settings) is None
