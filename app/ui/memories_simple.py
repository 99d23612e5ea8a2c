"""The Memories panel's simple view, as ChatGPT's memory page: what Engram believes about you, in plain sentences
said to you ("You like tea" for the stored "User likes tea": core.second_person, display only), most important
first, each with Delete (the trash, restorable) and "This is wrong" (the trash, and learning never keeps the same
fact again). A protected memory says so and offers neither: nothing changes it until it is
unprotected (in All details). Delete and ⌫ delete the selected rows here too.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QPushButton,
                               QVBoxLayout, QWidget)

from app.ui.memory_table import DeleteKeys
from app.ui.panel_widgets import empty_state
from core.second_person import to_second_person
from core.types import Memory

SHOWN_KINDS = ("semantic", "episodic")  # facts and events about the user; summaries of conversations are not beliefs
SHOWN_MAX = 300  # a list to read, not to scroll forever: the rest are in All details
PROTECTED_TIP = "Protected: nothing changes or deletes it. Unprotect it in All details first."


def believed(memories: Iterable[Memory]) -> list[Memory]:
    """Active facts about the user, most important first: pinned, protected and critical ones before the rest."""
    shown = [m for m in memories if m.is_active and m.kind in SHOWN_KINDS]
    return sorted(shown, key=lambda m: (m.pinned or m.protected or m.critical, m.importance, m.confidence,
                                        m.created_at), reverse=True)


STATES = {"lives_in": "You live in {}.", "name": "Your name is {}."}  # the state an event led to, said as it holds


def current_state(memory: Memory) -> str:
    """What holds now, said to you: "You live in Porto." for the fact learned from "I moved to Porto" (the move is
    in its history); anything else as stored, in the second person."""
    said = to_second_person(memory.statement)
    template = STATES.get(memory.relation)
    if (template and memory.subject == "user" and memory.object and memory.kind == "semantic"
            and not said.startswith(template.split("{")[0])):  # already said as the state: its own words
        return template.format(memory.object)
    return said


def state_words(memory: Memory) -> str:
    protected = "Protected: unprotect it in All details to delete it"  # why Delete is greyed out, on screen
    marks = (("Pinned", memory.pinned), (protected, memory.protected), ("Critical", memory.critical))
    return " · ".join(name for name, on in marks if on)


class BeliefRow(QWidget):
    """One sentence, its state, and its two actions."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory
        self.shown = current_state(memory)  # the stored words stay as they are
        self.sentence = QLabel(self.shown)
        self.sentence.setWordWrap(True)
        self.sentence.setTextFormat(Qt.TextFormat.PlainText)  # a memory is data: never rendered as markup
        self.state = QLabel(state_words(memory))
        self.state.setForegroundRole(QPalette.ColorRole.PlaceholderText)  # a palette role: follows light and dark mode
        self.delete = QPushButton("Delete")
        self.wrong = QPushButton("This is wrong")
        self.wrong.setToolTip("Remove it, and Engram will not learn it again")
        for button in (self.delete, self.wrong):
            button.setEnabled(not memory.protected)
            if memory.protected:
                button.setToolTip(PROTECTED_TIP)
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 4, 6, 4)
        row.addWidget(self.sentence, 1)
        row.addWidget(self.state)
        row.addWidget(self.delete)
        row.addWidget(self.wrong)


class BeliefList(QListWidget):
    """Each row as tall as its sentence needs at the list's width: one line for a short fact, more for a long one
    (a row's own size hint guessed a width, so rows of one line came out 30, 36 or 50 px tall)."""

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self.fit_rows()

    def fit_rows(self) -> None:
        width = self.viewport().width()
        for i in range(self.count()):
            item = self.item(i)
            row = self.itemWidget(item)
            if row is not None:
                height = row.heightForWidth(width) if row.hasHeightForWidth() else row.sizeHint().height()
                item.setSizeHint(QSize(row.sizeHint().width(), max(height, row.minimumSizeHint().height())))


class SimpleMemories(QWidget):
    delete_requested = Signal(list)  # memory ids
    wrong_requested = Signal(list)

    def __init__(self) -> None:
        super().__init__()
        self.heading = QLabel("What Engram believes about you")
        font = QFont(self.heading.font())
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.heading.setFont(font)
        self.list = BeliefList()
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setAlternatingRowColors(True)
        self.empty = empty_state("Engram believes nothing about you yet. What you tell it about yourself in Chat "
                                 "appears here, and so does what you add with Add a memory… above.")
        self.more = QLabel("")
        self.more.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.empty.setVisible(False)  # until the first load says the store is empty
        self.more.setVisible(False)
        self.rows: dict[int, BeliefRow] = {}
        self.memories: list[Memory] | None = None  # what the last set_memories was given (None: not loaded yet)
        self.imported: dict[int, str] = {}  # memory id → the assistant its history was imported from
        self._keys = DeleteKeys(self.list, self._delete_selected)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.heading)
        layout.addWidget(self.empty, 1)  # it takes the room the hidden list leaves: the heading stays on top
        layout.addWidget(self.list, 1)
        layout.addWidget(self.more)

    def set_memories(self, memories: Sequence[Memory], imported: dict[int, str] | None = None) -> None:
        """`imported`: memory id → "ChatGPT" for what was learned only from imported history; those come after
        what you told Engram itself, grouped under where they came from, so an import can be reviewed as one."""
        self.memories, self.imported = list(memories), dict(imported or {})
        shown = believed(memories)[:SHOWN_MAX]
        self.list.clear()
        self.rows = {}
        for memory in shown:
            if memory.id not in self.imported:
                self._add(memory)
        for source in sorted({self.imported[m.id] for m in shown if m.id in self.imported}):
            self._heading(f"From your {source} history")
            for memory in shown:
                if self.imported.get(memory.id) == source:
                    self._add(memory)
        left = len(believed(memories)) - len(shown)
        self.more.setText(f"…and {left} more, less important, in All details." if left else "")
        self.more.setVisible(bool(left))
        self.list.fit_rows()
        self.empty.setVisible(not shown)
        self.list.setVisible(bool(shown))

    def _add(self, memory: Memory) -> None:
        row = BeliefRow(memory)
        row.delete.clicked.connect(lambda: self.delete_requested.emit([memory.id]))
        row.wrong.clicked.connect(lambda: self.wrong_requested.emit([memory.id]))
        item = QListWidgetItem()
        item.setData(Qt.ItemDataRole.UserRole, memory.id)
        item.setToolTip(row.shown)
        item.setSizeHint(row.sizeHint())
        self.list.addItem(item)
        self.list.setItemWidget(item, row)
        self.rows[memory.id] = row

    def _heading(self, text: str) -> None:
        item = QListWidgetItem(text)
        item.setFlags(Qt.ItemFlag.NoItemFlags)  # a heading is read, not selected or deleted
        font = QFont(self.list.font())
        font.setBold(True)
        item.setFont(font)
        self.list.addItem(item)

    def statements(self) -> list[str]:
        """The sentences as shown, in order (what a person reads top to bottom); a group's heading as '## …'."""
        items = [self.list.item(i) for i in range(self.list.count())]
        rows = (self.list.itemWidget(item) for item in items)
        return [row.shown if isinstance(row, BeliefRow) else f"## {item.text()}" for item, row in zip(items, rows)]

    def selected_ids(self) -> list[int]:
        return [int(item.data(Qt.ItemDataRole.UserRole)) for item in self.list.selectedItems()]

    def select(self, memory_id: int) -> bool:
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.ItemDataRole.UserRole) == memory_id:
                self.list.setCurrentRow(i)
                return True
        return False

    def _delete_selected(self) -> None:
        ids = [i for i in self.selected_ids() if not self.rows[i].memory.protected]
        if ids:
            self.delete_requested.emit(ids)
