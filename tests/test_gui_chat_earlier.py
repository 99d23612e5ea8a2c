"""Under a reply, "From earlier conversations:" names the earlier turns it quoted — while it is written, when it
ends (drew on or not) and when the conversation is opened again — and a click opens the conversation where that
turn was said, at that turn. Offscreen, the real store and MiniLM embedder, a scripted chat model."""
from __future__ import annotations

import time

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app.ui.chat_earlier import EARLIER_CAPTION, LABEL_CHARS, EarlierRow, day_words, earlier_label  # noqa: E402
from core.memory.conversation import EarlierTurn  # noqa: E402
from core.memory.index import index_episodes  # noqa: E402
from core.store.episodes import add_episode  # noqa: E402
from core.store.sessions import create_session  # noqa: E402
from tests.fakes import ScriptedChatModel  # noqa: E402
from tests.guikit import on_db_lane  # noqa: E402
from tests.test_gui_chat import TURN_MS, _window  # noqa: E402

SAID = "My grandmother Philippa bakes sourdough every Sunday in her old stone oven."


def turn(**given) -> EarlierTurn:
    values = dict(episode_id=7, session_id=3, session_title="Family", at=time.time(), user_text=SAID,
                  why='matched "philippa"', drew_on=None)
    return EarlierTurn(**{**values, **given})


def test_each_quoted_turn_is_a_chip_with_its_day_words_and_reason(qtbot):
    row = EarlierRow()
    qtbot.addWidget(row)
    row.set_turns([turn(), turn(episode_id=8, session_id=None, user_text="Short.",
                                at=time.mktime((2024, 3, 9, 12, 0, 0, 0, 0, -1)))])
    first, hidden = row.chips()
    assert row.flow.itemAt(0).widget().text() == EARLIER_CAPTION and not row.isHidden()
    assert first.text().endswith("…”") and len(first.text()) <= LABEL_CHARS and "“My grandmother" in first.text()
    assert hidden.text() == "9 Mar 2024: “Short.”"  # another year is said
    tip = first.toolTip()
    assert tip.startswith("You said, today in “Family”:") and first.text().startswith("today: “")
    assert SAID in tip and "“Family”" in tip and 'Why: matched "philippa"' in tip and "Click to open" in tip
    assert not hidden.isEnabled() and "removed from the list" in hidden.toolTip()
    with qtbot.waitSignal(row.opened) as opened:
        qtbot.mouseClick(first, Qt.LeftButton)
    assert opened.args == [3, 7]
    row.show_drew_on([8])
    assert "did not draw on it" in row.chips()[0].toolTip() and "This reply drew on it." in row.chips()[1].toolTip()
    row.set_turns([turn(forgotten=True)])
    assert "Restore it in Forgetting" in row.chips()[0].toolTip() and row.chips()[0].isEnabled()
    row.set_turns([])
    assert row.isHidden() and row.flow.count() == 0


def test_a_day_is_said_as_a_person_says_it():
    now = time.mktime((2026, 3, 1, 9, 30, 0, 0, 0, -1))
    at = [time.mktime((2026, 3, 1, 0, 5, 0, 0, 0, -1)), time.mktime((2026, 2, 28, 23, 50, 0, 0, 0, -1)),
          time.mktime((2026, 2, 27, 12, 0, 0, 0, 0, -1)), time.mktime((2025, 12, 31, 12, 0, 0, 0, 0, -1))]
    assert [day_words(t, now) for t in at] == ["today", "yesterday", "27 Feb", "31 Dec 2025"]
    new_year = time.mktime((2027, 1, 1, 8, 0, 0, 0, 0, -1))
    assert day_words(time.mktime((2026, 12, 31, 22, 0, 0, 0, 0, -1)), new_year) == "yesterday"


def test_a_label_is_one_short_line_whatever_was_pasted(qtbot):
    label = earlier_label(turn(user_text="word\n\n" * 500))
    assert "\n" not in label and len(label) <= LABEL_CHARS


def test_the_chat_shows_the_earlier_turn_a_reply_used_and_opens_it_where_it_was_said(qtbot, tmp_path, embedder):
    win = _window(qtbot, tmp_path, chat=ScriptedChatModel(["Philippa bakes sourdough in a stone oven."]),
                  embedder=embedder)
    try:
        def earlier(db):
            family = create_session(db, "Family")
            add_episode(db, "I need to renew my passport next month.", "Noted.", session_id=family)
            said = add_episode(db, SAID, "How lovely.", session_id=family)
            add_episode(db, "Remind me to water the plants.", "Will do.", session_id=family)
            index_episodes(db, embedder, [said])
            return family, said
        family, said = on_db_lane(win, earlier)
        panel = win.show_panel("chat")
        with qtbot.waitSignal(panel.reply_finished, timeout=TURN_MS) as finished:
            panel.send("What does Philippa bake on Sundays?")
        reply = finished.args[0]
        qtbot.waitUntil(lambda: len(reply.earlier.chips()) == 3, timeout=10000)
        chip, *beside = reply.earlier.chips()  # the turn that matched, then the two beside it, lent its score
        assert "“My grandmother Philippa" in chip.text() and "This reply drew on it." in chip.toolTip()
        assert all("did not draw on it" in c.toolTip() and "next to matching turn" in c.toolTip() for c in beside)
        shown_then = [(c.text(), c.toolTip()) for c in (chip, *beside)]
        asked_in = panel.session_id
        panel.new_conversation()
        panel.open_session(asked_in)
        qtbot.waitUntil(lambda: len(panel.replies()) == 1, timeout=10000)
        again = panel.replies()[0].earlier.chips()
        assert [(c.text(), c.toolTip()) for c in again] == shown_then
        again = again[0]  # read back from the store, as shown when the reply ended
        qtbot.mouseClick(again, Qt.LeftButton)
        qtbot.waitUntil(lambda: panel.session_id == family and len(panel.replies()) == 3, timeout=10000)
        shown = next(m for m in panel.message_widgets() if m.role == "user" and m.text == SAID)
        assert "border" in shown.styleSheet()  # outlined for a moment, where it was said
        assert panel.title.text() == "Family"
    finally:
        win.panels["chat"].shutdown()
        win.runner.shutdown(wait=True)
        win.services.close()


def test_an_ampersand_in_a_memory_or_a_turn_is_shown_and_is_no_shortcut(qtbot):
    """A button reads "&" as its shortcut's mark: "Tom &Jerry" showed "Tom Jerry" and answered Alt+J."""
    from PySide6.QtGui import QKeySequence

    from app.ui.chat_chips import MemoryChip
    from app.ui.chat_learning import LearnedFact, LearnedRow
    row = EarlierRow()
    chip = MemoryChip(1, "Tom &Jerry are the user's cats")
    learned = LearnedRow(LearnedFact(2, "The user's cats are Tom &Jerry.", True))
    for widget in (row, chip, learned):
        qtbot.addWidget(widget)
    row.set_turns([turn(user_text="My cats are Tom &Jerry")])
    for button in (row.chips()[0], chip.open_button, learned.open_button):
        assert "&&Jerry" in button.text() and QKeySequence.mnemonic(button.text()).isEmpty()
