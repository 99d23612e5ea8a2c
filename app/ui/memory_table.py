"""The table model behind the Memories panel: one row per memory, sortable through a proxy; its filters and delete
keys; and what a purge says."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from PySide6.QtCore import (QAbstractTableModel, QEvent, QModelIndex, QObject, QPersistentModelIndex,
                            QSortFilterProxyModel, Qt)
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QAbstractItemView

from core.types import Memory
from core.words import counted

KINDS = ("all kinds", "semantic", "episodic", "summary")
STATUSES = ("active", "trashed", "forgotten", "invalidated", "all")
FLAG_FILTERS = ("any flags", "pinned", "protected", "critical")
LIST_LIMIT = 5000


def purged_words(result: Any) -> str:
    """What a purge erased, for the status line: "Purged 1 memory and 3 conversation turns for good."."""
    backups = result.backups_removed
    return (f"Purged {counted(result.memories, 'memory')} and {counted(result.episodes, 'conversation turn')} "
            f"for good." + (f" {counted(backups, 'upgrade backup')} still held their text and "
                            f"{'was' if backups == 1 else 'were'} deleted too." if backups else ""))


@dataclass(frozen=True)
class Filters:
    kind: str | None = None
    status: str | None = "active"
    flag: str | None = None

    def as_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"kind": self.kind, "status": self.status, "limit": LIST_LIMIT}
        if self.flag:
            kwargs[self.flag] = True
        return kwargs


COLUMNS = ("Statement", "Kind", "Flags", "Confidence", "Importance", "Last used", "Created", "Sources", "Status")


def flags_text(memory: Memory) -> str:
    marks = (("pinned", memory.pinned), ("protected", memory.protected), ("critical", memory.critical),
             ("permanent", memory.permanent))
    return ", ".join(name for name, on in marks if on)


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def day(timestamp: float | None) -> str:
    """The table's compact date (the time of day is in the row's tooltip and the detail pane)."""
    return "never" if timestamp is None else time.strftime("%Y-%m-%d", time.localtime(timestamp))


def importance_text(memory: Memory) -> str:
    """What is true of its importance: a critical fact is always kept, and a new fact has no score until Engram
    rates its memories in idle time (0.00 there read as "this does not matter")."""
    if memory.critical:
        return "critical"
    return "not rated yet" if memory.importance <= 0.0 else f"{memory.importance:.2f}"


def used_text(memory: Memory, recalled: float | None) -> str:
    """Last used: when a reply drew on it; a memory only recalled (in a reply's context, not drawn on) says so."""
    if memory.last_access is not None:
        return day(memory.last_access)
    return f"recalled {day(recalled)}, not drawn on" if recalled is not None else "never"


class MemoryTableModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.memories: list[Memory] = []
        self.recalled: dict[int, float] = {}  # memory id -> when a reply last recalled it

    def set_memories(self, memories: Sequence[Memory], recalled: dict[int, float] | None = None) -> None:
        self.beginResetModel()
        self.memories = list(memories)
        self.recalled = dict(recalled or {})
        self.endResetModel()

    def memory_at(self, row: int) -> Memory:
        return self.memories[row]

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.memories)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        memory = self.memories[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(memory, index.column())
        if role == Qt.ItemDataRole.UserRole:  # the sort key
            return self._sort_key(memory, index.column())
        if role == Qt.ItemDataRole.ToolTipRole:
            recalled = self.recalled.get(memory.id)
            return (f"{memory.statement}\nlast used (a reply drew on it) {when(memory.last_access)}, last recalled "
                    f"{when(recalled)}, created {when(memory.created_at)}")
        return None

    def _display(self, memory: Memory, column: int) -> str:
        values = (memory.statement, memory.kind, flags_text(memory), f"{memory.confidence:.2f}",
                  importance_text(memory), used_text(memory, self.recalled.get(memory.id)), day(memory.created_at),
                  ", ".join(f"#{i}" for i in memory.source_episode_ids), memory.status)
        return values[column]

    def _sort_key(self, memory: Memory, column: int) -> Any:
        keys = (memory.statement.lower(), memory.kind, flags_text(memory), memory.confidence,
                memory.importance + (2.0 if memory.critical else 0.0),
                memory.last_access or 0.0, memory.created_at, len(memory.source_episode_ids), memory.status)
        return keys[column]


class MemoryFilterProxy(QSortFilterProxyModel):
    """Sorts by real values (not their text) and filters rows by words typed in the search box."""

    def __init__(self) -> None:
        super().__init__()
        self.setSortRole(Qt.ItemDataRole.UserRole)
        self.words: list[str] = []

    def set_search(self, text: str) -> None:
        self.words = [w for w in text.lower().split() if w]
        self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        if not self.words:
            return True
        source = self.sourceModel()
        assert isinstance(source, MemoryTableModel)  # the only model this proxy is given
        memory = source.memory_at(source_row)
        haystack = " ".join((memory.statement, memory.subject, memory.relation, memory.object)).lower()
        return all(word in haystack for word in self.words)


class DeleteKeys(QObject):
    """Delete and ⌫ (Backspace) on the table delete the selected memories, as in Finder and Mail."""

    def __init__(self, table: QAbstractItemView, on_delete: Callable[[], object]) -> None:
        super().__init__(table)
        self.on_delete = on_delete
        table.installEventFilter(self)

    def eventFilter(self, _watched: QObject, event: QEvent) -> bool:
        if (isinstance(event, QKeyEvent) and event.type() == QEvent.Type.KeyPress
                and event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)
                and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier):
            self.on_delete()
            return True
        return False
