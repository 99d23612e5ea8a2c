"""What a user sees of the chat thread itself (offscreen, widgets only): the "Recalled:" chips said to you as the
Remembered row says it, a long failure that wraps instead of widening the chat, and a cleared thread that shows
nothing of the old conversation even before Qt's deferred deletes run."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("pytestqt")

from app.ui.chat_memory_watch import ShownMemory  # noqa: E402
from app.ui.chat_thread import MessageThread  # noqa: E402
from app.ui.chat_chips import MemoryChip  # noqa: E402
from app.ui.chat_widgets import MessageWidget  # noqa: E402
from tests.test_gui_chat_learning import SAID_TO_YOU  # noqa: E402

# The words models/chat.py raises when the message and the recalled memories do not fit the context window.
CONTEXT_ERROR = ("The message and memory context need 5231 tokens but only 4096 fit in this model's context window; "
                 "shorten the message.")


@pytest.mark.parametrize("stored, shown", SAID_TO_YOU)
def test_a_chip_says_the_memory_to_you_and_keeps_the_stored_words_behind_it(qtbot, stored, shown):
    chip = MemoryChip(7, stored, why="about music")
    qtbot.addWidget(chip)
    assert chip.open_button.text() == shown
    assert chip.open_button.toolTip().split("\n")[0] == stored  # the memory as stored, what open and ✕ act on
    assert "Why: about music" in chip.open_button.toolTip() and chip.memory_id == 7


def test_a_chip_edited_elsewhere_is_said_to_you_too(qtbot):
    chip = MemoryChip(7, "User likes jasmine tea")
    qtbot.addWidget(chip)
    chip.show_memory(ShownMemory("User likes green tea", deleted=False))
    assert chip.open_button.text() == "You like green tea"
    assert chip.open_button.toolTip().startswith("User likes green tea")


def test_the_chips_under_a_reply_sit_beside_remembered_in_the_same_words(qtbot):
    reply = MessageWidget("assistant", "You could practise scales.")
    qtbot.addWidget(reply)
    reply.set_used([SimpleNamespace(id=3, text="User plays the cello", why="")])
    assert [c.open_button.text() for c in reply.chip_widgets()] == ["You play the cello"]


def _thread_with_a_failed_reply(qtbot, width: int) -> tuple[MessageThread, MessageWidget]:
    thread = MessageThread("Nothing yet")
    qtbot.addWidget(thread)
    thread.resize(width, 500)
    thread.add(MessageWidget("user", "Tell me everything you remember about me"))
    reply = thread.add(MessageWidget("assistant", ""))
    reply.set_status(CONTEXT_ERROR)
    thread.show()
    qtbot.waitExposed(thread)
    qtbot.wait(50)  # layouts settle
    return thread, reply


def test_a_long_failure_wraps_within_the_thread_and_never_scrolls_sideways(qtbot):
    thread, reply = _thread_with_a_failed_reply(qtbot, 420)
    viewport = thread.scroll_area.viewport().width()
    assert thread.scroll_area.widget().width() <= viewport  # the messages fit the thread's width
    assert reply.width() <= viewport and reply.status.width() <= viewport
    assert not thread.scroll_area.horizontalScrollBar().isVisible()
    line = reply.status.fontMetrics().height()
    assert reply.status.height() >= 2 * line  # wrapped onto more lines, as message text does
    assert reply.status.text() == CONTEXT_ERROR  # all of it, not cut off


def test_a_long_failure_rewraps_when_the_window_narrows(qtbot):
    thread, reply = _thread_with_a_failed_reply(qtbot, 700)
    thread.resize(300, 500)
    qtbot.wait(50)
    assert thread.scroll_area.widget().width() <= thread.scroll_area.viewport().width()
    assert not thread.scroll_area.horizontalScrollBar().isVisible()


def test_clear_hides_the_old_conversation_before_deferred_deletes_run(qtbot):
    thread = MessageThread("Nothing yet")
    qtbot.addWidget(thread)
    thread.resize(500, 400)
    old = [thread.add(MessageWidget("user", "An old question")), thread.add(MessageWidget("assistant", "An old reply"))]
    thread.show()
    qtbot.waitExposed(thread)
    thread.clear()
    new = thread.add(MessageWidget("user", "A new question"))  # no event processed in between
    assert thread.widgets() == [new]
    assert all(not widget.isVisible() for widget in old)  # nothing shows through the new conversation
    assert new.isVisible()
