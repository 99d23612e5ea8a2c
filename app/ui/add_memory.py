"""Add a memory by hand: what a person wants Engram to know without waiting for it to learn it from a chat (a weak
model may learn nothing: SmolLM2-135M extracts no grounded fact). The text is checked here, before the dialog closes,
so a bad entry is said in one line and nothing typed is lost."""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import QCheckBox, QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from core.errors import InvalidInput
from core.memory.manage import SAID_OUTRIGHT
from core.store.text import clean_text

EXAMPLE = "e.g. I'm allergic to penicillin.  ·  My sister Ana lives in Lisbon."


@dataclass(frozen=True)
class NewMemory:
    statement: str
    critical: bool = False
    protected: bool = False

    def as_kwargs(self) -> dict:
        return {"critical": self.critical, "protected": self.protected, "confidence": SAID_OUTRIGHT,
                "reason": "added by hand"}


class AddMemoryDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a memory")
        self.text = QPlainTextEdit()
        self.text.setPlaceholderText(EXAMPLE)
        # the platform's words: ⌘↩ on a Mac, Ctrl+Return elsewhere
        keys = QKeySequence('Ctrl+Return').toString(QKeySequence.SequenceFormat.NativeText)
        self.text.setToolTip(f"{keys} remembers it")
        self.text.setTabChangesFocus(True)
        self.critical = QCheckBox("Critical: always keep it in mind (an allergy, a medication, a deadline)")
        self.protected = QCheckBox("Protected: never forget or delete it automatically")
        self.error = QLabel("")
        self.error.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Remember")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.text.textChanged.connect(self._enable)
        self.text.installEventFilter(self)  # Return adds a line; ⌘Return (Ctrl+Return elsewhere) remembers
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("What should Engram remember about you?"))
        layout.addWidget(self.text, 1)
        for widget in (self.critical, self.protected, self.error, self.buttons):
            layout.addWidget(widget)
        self.resize(520, 260)
        self._enable()

    def _enable(self) -> None:
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(bool(self.text.toPlainText().strip()))
        self.error.setText("")

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (watched is self.text and isinstance(event, QKeyEvent) and event.type() == QEvent.Type.KeyPress
                and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
                and event.modifiers() & Qt.KeyboardModifier.ControlModifier):
            if self.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled():
                self.accept()
            return True
        return super().eventFilter(watched, event)

    def accept(self) -> None:
        try:
            clean_text(self.text.toPlainText(), "the memory")
        except InvalidInput as exc:
            self.error.setText(f"{str(exc)[:1].upper()}{str(exc)[1:]}.")
            return
        super().accept()

    def memory(self) -> NewMemory:
        return NewMemory(self.text.toPlainText().strip(), self.critical.isChecked(), self.protected.isChecked())
