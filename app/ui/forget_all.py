"""Forget everything: a dialog that says what goes and what stays, and erases only once the shown word is typed."""
from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLineEdit, QVBoxLayout, QWidget

from core.store.wipe import WHAT_STAYS

WORD = "FORGET"  # the same word `engram memory forget-all` asks for


class ForgetAllDialog(QDialog):
    def __init__(self, parent: QWidget | None, erased: str) -> None:
        super().__init__(parent)
        self.setWindowTitle("Forget everything")
        text = QLabel(f"Engram will erase everything it knows about you: {erased or 'nothing is stored yet'}.\n\n"
                      f"A backup of the whole memory file is saved first, so this can be undone.\n"
                      f"What stays: {WHAT_STAYS}.\n\nType {WORD} to confirm.")
        text.setWordWrap(True)
        self.word = QLineEdit()
        self.word.setPlaceholderText(WORD)
        self.buttons = QDialogButtonBox(QDialogButtonBox.Cancel)
        self.erase = self.buttons.addButton("Forget everything", QDialogButtonBox.DestructiveRole)
        self.erase.setEnabled(False)
        self.erase.clicked.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.word.textChanged.connect(lambda typed: self.erase.setEnabled(typed == WORD))
        layout = QVBoxLayout(self)
        layout.addWidget(text)
        layout.addWidget(self.word)
        layout.addWidget(self.buttons)

    def accept(self) -> None:
        if self.word.text() == WORD:  # Return in the field must not get round the word
            super().accept()
