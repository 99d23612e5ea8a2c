"""The conversation list: search, new, rename (in place) and delete; all store work on the db lane."""
from __future__ import annotations

import time
from typing import Any, Sequence

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontMetrics, QKeySequence, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QApplication, QHBoxLayout, QLabel, QLineEdit, QListWidget,
                               QListWidgetItem, QMessageBox, QPushButton, QStyle, QStyledItemDelegate,
                               QStyleOptionViewItem, QVBoxLayout, QWidget)

from core.importers.batches import session_import_labels
from core.store import sessions as store

UNTITLED = "New conversation"
SEARCH_DELAY_MS = 250
TITLE_CHARS = 60
ORIGIN_ROLE = Qt.ItemDataRole.UserRole + 1  # 'imported from ChatGPT, 2024-05-02' on an imported conversation's item
ORIGIN_INDENT = 4  # pixels: the origin line starts about where the title's text does


def title_from(text: str) -> str:
    """A first title for a conversation: the start of its first message."""
    words = " ".join(text.split())
    return words if len(words) <= TITLE_CHARS else words[: TITLE_CHARS - 1].rstrip() + "…"


def new_key() -> str:
    """The New Conversation key as this platform writes it: ⌘N on a Mac, Ctrl+N elsewhere."""
    return QKeySequence("Ctrl+N").toString(QKeySequence.SequenceFormat.NativeText)


def empty_text() -> str:
    return f"No conversations yet.\nPress {new_key()} or type below to start one."


def when_label(timestamp: float) -> str:
    same_day = time.localtime(timestamp)[:3] == time.localtime()[:3]
    return time.strftime("%H:%M" if same_day else "%d %b", time.localtime(timestamp))


class OriginLine(QStyledItemDelegate):
    """An imported conversation shows where it came from on a second, smaller line under its title ("imported from
    ChatGPT, 2024-05-02"). Only what is drawn gets the line: renaming edits the title alone."""

    def paint(self, painter: Any, option: Any, index: Any) -> None:
        origin = index.data(ORIGIN_ROLE)
        if not origin:
            super().paint(painter, option, index)
            return
        title = QStyleOptionViewItem(option)
        title.rect = option.rect.adjusted(0, 0, 0, -self._line(option))  # the title on the first line
        self._background(painter, option)
        super().paint(painter, title, index)
        painter.save()
        font = self._font(option)
        painter.setFont(font)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.PlaceholderText
        painter.setPen(option.palette.color(role))
        line = option.rect.adjusted(ORIGIN_INDENT, option.rect.height() - self._line(option), -ORIGIN_INDENT, 0)
        painter.drawText(line, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         QFontMetrics(font).elidedText(origin, Qt.TextElideMode.ElideRight, line.width()))
        painter.restore()

    def sizeHint(self, option: Any, index: Any) -> QSize:  # noqa: N802 - Qt's name
        size = super().sizeHint(option, index)
        return QSize(size.width(), size.height() + self._line(option)) if index.data(ORIGIN_ROLE) else size

    @staticmethod
    def _font(option: Any) -> QFont:
        font = QFont(option.font)
        if font.pointSizeF() > 0:
            font.setPointSizeF(max(font.pointSizeF() * 0.85, 8.0))
        return font

    def _line(self, option: Any) -> int:
        return QFontMetrics(self._font(option)).height() + 2

    @staticmethod
    def _background(painter: Any, option: Any) -> None:
        """The row's selection or hover background over both lines, as the style draws it."""
        whole = QStyleOptionViewItem(option)
        whole.text = ""
        style = option.widget.style() if option.widget is not None else QApplication.style()
        style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, whole, painter, option.widget)


class SessionList(QWidget):
    chosen = Signal(object)  # the session id, or None when no conversation is selected
    new_requested = Signal()
    loaded = Signal()  # after each reload, for tests

    def __init__(self, services: Any, runner: Any) -> None:
        super().__init__()
        self.services = services
        self.runner = runner
        self.sessions: list[Any] = []
        self._origins: dict[int, str] = {}  # session id → 'imported from ChatGPT, 2024-05-02'
        self._selected: int | None = None
        self._filling = False
        self._build()

    def _build(self) -> None:
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search conversations")
        self.search.setClearButtonEnabled(True)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(self.reload)
        self.search.textChanged.connect(lambda _text: self._search_timer.start())
        self.list = QListWidget()
        self.list.setObjectName("conversations")
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # long titles are elided instead
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setItemDelegate(OriginLine(self.list))  # an imported conversation's second line
        self.list.currentItemChanged.connect(self._on_current)
        self.list.itemChanged.connect(self._on_edited)
        self.empty = QLabel(empty_text())
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.new_button = QPushButton("New")
        self.new_button.setToolTip(f"New conversation ({new_key()})")
        self.new_button.clicked.connect(self.new_requested)
        self.rename_button = QPushButton("Rename")
        self.rename_button.clicked.connect(self.edit_current)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self.on_delete)
        buttons = QHBoxLayout()
        for button in (self.new_button, self.rename_button, self.delete_button):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty, 1)
        layout.addLayout(buttons)
        self._update_buttons()

    # -- loading -------------------------------------------------------------------------------------

    def reload(self, select: int | None = None) -> None:
        text = self.search.text()
        wanted = self._selected if select is None else select

        def load() -> tuple[list, dict[int, str]]:
            rows = store.search_sessions(self.services.db, text)
            return rows, session_import_labels(self.services.db, [row.id for row in rows])
        self.runner.submit("db", load, on_done=lambda found: self._fill(found[0], found[1], wanted),
                           on_error=self._on_error)

    def reload_quietly(self) -> None:
        """Reload for a change made elsewhere, unless the user is renaming a conversation in the list now."""
        if self.list.state() != QAbstractItemView.State.EditingState:
            self.reload()

    def _fill(self, sessions: Sequence[Any], origins: dict[int, str], wanted: int | None) -> None:
        self._filling = True
        self.sessions, self._origins = list(sessions), dict(origins)
        self.list.clear()
        for session in self.sessions:
            item = QListWidgetItem(session.title or UNTITLED)
            item.setData(Qt.ItemDataRole.UserRole, int(session.id))
            origin = origins.get(int(session.id))  # 'imported from ChatGPT, 2024-05-02'
            item.setToolTip(f"{session.title or UNTITLED}\n{origin + chr(10) if origin else ''}"
                            f"last message {when_label(session.updated_at)}")
            item.setData(ORIGIN_ROLE, origin)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
            self.list.addItem(item)
            if session.id == wanted:
                self.list.setCurrentItem(item)
        self._filling = False
        searching = bool(self.search.text().strip())
        self.empty.setText("No conversation matches." if searching else empty_text())
        self.empty.setVisible(not self.sessions)
        self.list.setVisible(bool(self.sessions))
        self._update_buttons()
        self.loaded.emit()

    def drop(self, session_id: int) -> None:
        """Take a conversation off the list without asking the store again (it was just removed there)."""
        if self._selected == session_id:
            self._selected = None
        self._fill([s for s in self.sessions if s.id != session_id], self._origins, self._selected)

    # -- selection -----------------------------------------------------------------------------------

    @property
    def current_id(self) -> int | None:
        return self._selected

    def select(self, session_id: int | None) -> None:
        """Mark a conversation as current without announcing it (the panel already shows it)."""
        self._selected = session_id
        self._filling = True
        self.list.setCurrentRow(-1)
        for row in range(self.list.count()):
            if self.list.item(row).data(Qt.ItemDataRole.UserRole) == session_id:
                self.list.setCurrentRow(row)
        self._filling = False
        self._update_buttons()

    def _on_current(self, item: QListWidgetItem | None, _previous: Any = None) -> None:
        if self._filling:
            return
        self._selected = None if item is None else int(item.data(Qt.ItemDataRole.UserRole))
        self._update_buttons()
        self.chosen.emit(self._selected)

    def _update_buttons(self) -> None:
        for button in (self.rename_button, self.delete_button):
            button.setEnabled(self._selected is not None)

    # -- rename and delete ---------------------------------------------------------------------------

    def edit_current(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.list.editItem(item)

    def _on_edited(self, item: QListWidgetItem) -> None:
        if not self._filling:
            self.rename(int(item.data(Qt.ItemDataRole.UserRole)), item.text())

    def rename(self, session_id: int, title: str) -> None:
        self.runner.submit("db", lambda: store.rename_session(self.services.db, session_id, title.strip()),
                           on_done=lambda _s: self.reload(), on_error=self._on_error)

    def on_delete(self) -> None:
        if self._selected is None:
            return
        answer = QMessageBox.question(self, "Delete conversation",
                                      "Remove this conversation from the list? What Engram learned from it "
                                      "stays in Memories, where you can edit or forget it.")
        if answer == QMessageBox.StandardButton.Yes:
            self.delete(self._selected)

    def delete(self, session_id: int) -> None:
        def done(_session: Any) -> None:
            if self._selected == session_id:
                self._selected = None
                self.chosen.emit(None)
            self.reload()
        self.runner.submit("db", lambda: store.trash_session(self.services.db, session_id), on_done=done,
                           on_error=self._on_error)

    def focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    def _on_error(self, exc: BaseException) -> None:
        self.empty.setText(f"Could not load conversations: {exc}")
        self.empty.setVisible(True)
