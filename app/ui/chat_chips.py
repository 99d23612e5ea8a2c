"""The memory chips under a reply: one per memory in its context, said to you, grouped by what the reply drew on."""
from __future__ import annotations

from typing import Any, Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QToolButton

from app.ui.plain_text import button_text
from core.second_person import to_second_person

CHIP_CHARS = 42

# While a reply is written its chips are what was recalled for it; once stored, those it drew on come first and
# the rest stay "recalled" (never "used" one moment and "not used" the next).
USED_CAPTION, DREW_ON_CAPTION, RECALLED_CAPTION = "Recalled:", "Drew on:", "Also recalled:"


def stored_drew_on(used: Sequence[Any]) -> set[int] | None:
    """The ids the reply drew on, when every memory says (a stored reply); None when any does not."""
    known = [getattr(memory, "drew_on", None) for memory in used]
    if not known or any(k is None for k in known):
        return None
    return {int(memory.id) for memory, drew in zip(used, known) if drew}


def unique_memories(used: Sequence[Any]) -> list[Any]:
    """One chip per memory: the same id, or the same statement stored twice, shows once (the first, best ranked)."""
    seen_ids, seen_texts, kept = set(), set(), []
    for memory in used:
        text = " ".join(str(memory.text).split()).casefold()
        if int(memory.id) in seen_ids or text in seen_texts:
            continue
        seen_ids.add(int(memory.id))
        seen_texts.add(text)
        kept.append(memory)
    return kept


def chip_label(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CHIP_CHARS else text[: CHIP_CHARS - 1] + "…"


class MemoryChip(QFrame):
    """One memory a reply used: click the text to open it, ✕ to veto it for this answer. Its words are said to you
    ("You play the cello"), as the Remembered row says them; the tooltip keeps the memory as stored."""
    opened = Signal(int)
    vetoed = Signal(int)

    def __init__(self, memory_id: int, text: str, why: str = "", attribution: str = "") -> None:
        super().__init__()
        self.memory_id = memory_id
        self.why = why
        self.attribution = attribution  # whether the reply drew on it, said in the tooltip
        self.setObjectName("memoryChip")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.open_button = QToolButton()
        self.open_button.setAutoRaise(True)
        self.show_text(text)
        self.open_button.clicked.connect(lambda: self.opened.emit(self.memory_id))
        self.veto_button = QToolButton()
        self.veto_button.setText("✕")
        self.veto_button.setAutoRaise(True)
        self.veto_button.setToolTip("Don't use this memory: answer again without it and lower its weight")
        self.veto_button.clicked.connect(lambda: self.vetoed.emit(self.memory_id))
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(self.open_button)
        row.addWidget(self.veto_button)

    def show_text(self, text: str, note: str = "") -> None:
        self.open_button.setText(button_text(chip_label(to_second_person(text))))  # display only
        parts = [text, f"Why: {self.why}" if self.why else "", self.attribution, note]
        self.open_button.setToolTip("\n\n".join(p for p in parts if p))

    def show_memory(self, shown: Any) -> None:
        """The memory as stored now, after a change made elsewhere: new words, or struck out once it is in the
        trash (it opens there, where Restore is) or purged for good (None)."""
        deleted = shown is None or shown.deleted
        if shown is not None:
            self.show_text(shown.statement, "In the trash: Restore it in Memories." if deleted else "")
        font = self.open_button.font()
        font.setStrikeOut(deleted)
        self.open_button.setFont(font)
        self.open_button.setEnabled(shown is not None)
        self.veto_button.setVisible(not deleted)  # nothing to leave out of a reply any more
