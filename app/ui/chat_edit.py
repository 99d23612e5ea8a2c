"""Edit a sent message and send it again, the earlier branch kept one click away ("‹ 1/2 ›" under the message), as
Jan and ChatGPT do. The store keeps every turn of every branch (core.store.branches); the window shows one.

UserControls sits under each of the user's messages: Edit opens the message in place with Send and Cancel; the
arrows show the message's other versions. Branches does the panel's part: a sent edit replaces what followed the
message on screen and is answered with only what came before it as the conversation; an arrow shows the chosen
version with the turns that followed it when it was left.
"""
from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QToolButton, QVBoxLayout, QWidget

from core.store import branches


class UserControls(QWidget):
    """Under a sent message: Edit, and ‹ n/m › once it has more than one version."""
    edit_sent = Signal(str)  # the edited text, to send in place of the message
    version_step = Signal(int)  # -1 the version before, +1 the one after

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.episode_id: int | None = None
        self.edit_button = _link_button("Edit", "Change this message and send it again (this version stays, "
                                                "one click away)")
        self.edit_button.clicked.connect(self.open_editor)
        self.older_button = _link_button("‹", "The earlier version of this message, with its replies")
        self.newer_button = _link_button("›", "The later version of this message")
        self.older_button.clicked.connect(lambda: self.version_step.emit(-1))
        self.newer_button.clicked.connect(lambda: self.version_step.emit(1))
        self.version_count = QLabel("")
        self.version_count.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.editor = QPlainTextEdit()
        self.editor.setFixedHeight(72)
        self.send_button, self.cancel_button = QPushButton("Send"), QPushButton("Cancel")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self._send)
        self.cancel_button.clicked.connect(self.close_editor)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.send_button)
        self.editing = QWidget()
        editing = QVBoxLayout(self.editing)
        editing.setContentsMargins(0, 0, 0, 0)
        editing.addWidget(self.editor)
        editing.addLayout(buttons)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for widget in (self.older_button, self.version_count, self.newer_button, self.edit_button):
            row.addWidget(widget)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.editing)
        layout.addLayout(row)
        self.editing.setVisible(False)
        self.set_turn(None)

    def set_turn(self, episode_id: int | None, version: tuple[int, int] = (1, 1)) -> None:
        """The stored turn this message began (Edit needs one: an incognito message is never stored)."""
        self.episode_id = episode_id
        self.edit_button.setVisible(episode_id is not None)
        position, count = version
        for widget in (self.older_button, self.version_count, self.newer_button):
            widget.setVisible(count > 1)
        self.older_button.setEnabled(position > 1)
        self.newer_button.setEnabled(position < count)
        self.version_count.setText(f"{position}/{count}")

    def open_editor(self) -> None:
        message = self.parent()
        self.editor.setPlainText(getattr(message, "text", ""))
        self.editing.setVisible(True)
        self.edit_button.setVisible(False)
        self.editor.setFocus()
        self.editor.selectAll()

    def close_editor(self) -> None:
        self.editing.setVisible(False)
        self.edit_button.setVisible(self.episode_id is not None)

    def _send(self) -> None:
        text = self.editor.toPlainText().strip()
        if text:
            self.close_editor()
            self.edit_sent.emit(text)


class Branches(QObject):
    """The chat panel's side of editing: resend an edited message, show another version."""

    def __init__(self, panel: Any) -> None:
        super().__init__(panel)
        self.panel = panel

    def attach(self, message: Any) -> None:
        message.controls.edit_sent.connect(lambda text, m=message: self.resend(m, text))
        message.controls.version_step.connect(lambda step, m=message: self.step(m, step))

    def resend(self, message: Any, text: str) -> None:
        """The edited message replaces the shown one and what followed it; the store keeps both branches."""
        panel = self.panel
        episode_id = message.controls.episode_id
        if episode_id is None or panel.turns.busy or panel._starting:
            panel._notice("Wait for the reply to end, then send the edit again.")
            return
        widgets = panel.message_widgets()
        for later in widgets[widgets.index(message) + 1:]:
            panel.thread_view.remove(later)
        message.set_text(text)
        message.controls.set_turn(None)  # until the edit is stored
        from app.ui.chat_turn import TurnRequest
        request = TurnRequest(panel.session_id, text, dial=panel.dial.currentText(), edits=episode_id)
        panel._begin_reply(panel._add_message("assistant", after=message), request)

    def stored(self, reply: Any, record: Any) -> None:
        """A reply is stored: the message it answers gets its turn, and its versions when it is an edit."""
        asked = self._asked(reply)
        episode_id = getattr(record, "episode_id", None)
        if asked is None or episode_id is None:
            return
        asked.controls.set_turn(episode_id)
        if getattr(reply.request, "edits", None) is not None:
            self.panel.runner.submit("db", branches.version_counts, self.panel.services.db, [episode_id],
                                     on_done=lambda found: asked.controls.set_turn(
                                         episode_id, found.get(episode_id, (1, 1))))

    def step(self, message: Any, step: int) -> None:
        """Show the version before or after this one, with the turns that followed it when it was left."""
        panel = self.panel
        episode_id, session_id = message.controls.episode_id, panel.session_id
        if episode_id is None or session_id is None or panel.turns.busy:
            return

        def switch(db: Any) -> int:
            group = branches.versions(db, episode_id)
            chosen = group[max(0, min(len(group) - 1, group.index(episode_id) + step))]
            branches.show_version(db, episode_id, chosen)
            return chosen
        self.panel.runner.submit("db", switch, panel.services.db, on_done=lambda chosen: self._reopen(chosen),
                                 on_error=lambda exc: panel._notice(f"Could not show that version: {exc}"))

    def _reopen(self, chosen: int) -> None:
        if self.panel.session_id is not None:
            self.panel.open_turn(self.panel.session_id, chosen)

    def _asked(self, reply: Any) -> Any:
        widgets = self.panel.message_widgets()
        if reply not in widgets:
            return None
        index = widgets.index(reply)
        return next((w for w in reversed(widgets[:index]) if w.role == "user"), None)


def _link_button(text: str, tip: str, on_click: Callable[[], None] | None = None) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tip)
    button.setAutoRaise(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    if on_click is not None:
        button.clicked.connect(on_click)
    return button
