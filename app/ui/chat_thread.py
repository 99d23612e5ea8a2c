"""The conversation's messages, stacked in a scroll area, with a placeholder while there are none."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.ui.chat_widgets import MessageWidget, discard
from app.ui.flow_layout import empty_layout, layout_widgets

REVEAL_MS = 2500


class MessageThread(QWidget):
    def __init__(self, empty_text: str) -> None:
        super().__init__()
        self.empty = QLabel(empty_text)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.messages = QVBoxLayout()
        self.messages.setSpacing(8)
        holder = QWidget()
        outer = QVBoxLayout(holder)
        outer.addLayout(self.messages)
        outer.addStretch(1)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        # messages wrap to the width; never sideways
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll_area.setWidget(holder)
        self.scroll_area.setVisible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.empty, 1)
        layout.addWidget(self.scroll_area, 1)

    def add(self, message: MessageWidget, after: MessageWidget | None = None) -> MessageWidget:
        """At the end, or right after `after` (a reply under the message it answers, above any still waiting)."""
        index = self.messages.indexOf(after) if after is not None else -1
        if index >= 0:
            self.messages.insertWidget(index + 1, message)
        else:
            self.messages.addWidget(message)
        self.empty.setVisible(False)
        self.scroll_area.setVisible(True)
        return message

    def widgets(self) -> list[MessageWidget]:
        return [w for w in layout_widgets(self.messages) if isinstance(w, MessageWidget)]

    def remove(self, message: MessageWidget) -> None:
        self.messages.removeWidget(message)
        discard(message)

    def clear(self) -> None:
        """The old conversation is gone at once: a new one added before deferred deletes run shows alone."""
        empty_layout(self.messages)
        self.empty.setVisible(True)
        self.scroll_area.setVisible(False)

    def reveal(self, message: MessageWidget) -> None:
        """Once laid out, scroll the message to the top and outline it for a moment: where an earlier turn was said."""
        bar = self.scroll_area.verticalScrollBar()
        QTimer.singleShot(0, message, lambda: bar.setValue(message.y()))
        message.setStyleSheet(f"#{message.objectName()} {{ border: 2px solid palette(highlight); }}")
        QTimer.singleShot(REVEAL_MS, message, lambda: message.setStyleSheet(""))

    def scroll_to_end(self) -> None:
        """Once the new content is laid out (the next turn of the event loop)."""
        bar = self.scroll_area.verticalScrollBar()
        QTimer.singleShot(0, lambda: bar.setValue(bar.maximum()))
