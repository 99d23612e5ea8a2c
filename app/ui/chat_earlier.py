"""The earlier conversation turns under a reply: what it quoted from other conversations, each opening where it was
said. The memory chips (app.ui.chat_chips) show the memories; these show the turns, which the chips never did."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Sequence

from PySide6.QtCore import Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QToolButton, QWidget

from app.ui.flow_layout import FlowLayout, empty_layout, layout_widgets
from app.ui.plain_text import button_text

EARLIER_CAPTION = "From earlier conversations:"
LABEL_CHARS = 48
TOOLTIP_CHARS = 400  # a pasted page is shown by its head; the whole turn is one click away


def day_words(timestamp: float, now: float | None = None) -> str:
    """"today", "yesterday", "3 Nov", or "3 Nov 2025" when not this year (local time)."""
    day, today = time.localtime(timestamp), time.localtime(now)
    yesterday = time.localtime(time.mktime((today.tm_year, today.tm_mon, today.tm_mday - 1, 12, 0, 0, 0, 0, -1)))
    if day[:3] == today[:3]:
        return "today"
    if day[:3] == yesterday[:3]:
        return "yesterday"
    text = f"{day.tm_mday} {time.strftime('%b', day)}"
    return text if day.tm_year == today.tm_year else f"{text} {day.tm_year}"


def earlier_label(turn: Any) -> str:
    """The day and the head of what the person said then: "3 Nov: “I moved to Lisbon last spring…”"."""
    words = " ".join(str(turn.user_text).split())
    room = LABEL_CHARS - len(day_words(turn.at)) - 4
    quoted = words if len(words) <= room else words[: room - 1].rstrip() + "…"
    return f"{day_words(turn.at)}: “{quoted}”"


def earlier_tooltip(turn: Any) -> str:
    words = str(turn.user_text).strip()
    if len(words) > TOOLTIP_CHARS:
        words = words[: TOOLTIP_CHARS - 1].rstrip() + "…"
    where = f" in “{turn.session_title}”" if turn.session_title else ""
    day = day_words(turn.at)
    said = f"You said, {day if day in ('today', 'yesterday') else 'on ' + day}{where}:\n{words}"
    drew = {True: "This reply drew on it.", False: "Given to the model for this reply, which did not draw on it.",
            None: ""}[turn.drew_on]
    opens = ("Its conversation was removed from the list, so it cannot be opened." if turn.session_id is None else
             "Forgotten since (compacted into a summary): Restore it in Forgetting to see it in its conversation."
             if turn.forgotten else "Click to open that conversation.")
    return "\n\n".join(p for p in (said, f"Why: {turn.why}" if turn.why else "", drew, opens) if p)


class EarlierRow(QWidget):
    """One chip per earlier turn a reply quoted; a click opens its conversation at that turn."""
    opened = Signal(int, int)  # session id, episode id

    def __init__(self) -> None:
        super().__init__()
        self.flow = FlowLayout(self)
        self.turns: list[Any] = []
        self.setVisible(False)

    def set_turns(self, turns: Sequence[Any]) -> None:
        empty_layout(self.flow)
        self.turns = list(turns)
        if self.turns:
            caption = QLabel(EARLIER_CAPTION)
            caption.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            self.flow.addWidget(caption)
        for turn in self.turns:
            self.flow.addWidget(self._chip(turn))
        self.setVisible(bool(self.turns))

    def show_drew_on(self, drew_on: Sequence[int]) -> None:
        """The reply is stored: each chip says whether it drew on that turn."""
        drawn = {int(i) for i in drew_on}
        self.set_turns([_with_drew_on(t, int(t.episode_id) in drawn) for t in self.turns])

    def chips(self) -> list[QToolButton]:
        return [w for w in layout_widgets(self.flow) if isinstance(w, QToolButton)]

    def _chip(self, turn: Any) -> QToolButton:
        chip = QToolButton()
        chip.setObjectName("earlierTurnChip")
        chip.setAutoRaise(True)
        chip.setText(button_text(earlier_label(turn)))
        chip.setToolTip(earlier_tooltip(turn))
        chip.setEnabled(turn.session_id is not None)
        if turn.session_id is not None:
            chip.clicked.connect(lambda: self.opened.emit(int(turn.session_id), int(turn.episode_id)))
        return chip


def _with_drew_on(turn: Any, drew_on: bool) -> Any:
    return replace(turn, drew_on=drew_on)
