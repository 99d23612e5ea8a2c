"""Forget everything: a dialog that says what goes and what stays, and erases only once the shown word is typed;
then "Bring it back" puts the backup's rows back in place, while nothing new was learned."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from core.store import wipe
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
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.erase = self.buttons.addButton("Forget everything", QDialogButtonBox.ButtonRole.DestructiveRole)
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


class ForgetEverything(QObject):
    """The panel's two buttons and what they run on the db lane; `done` and `failed` report in the panel."""

    def __init__(self, parent: QWidget, runner: Any, services: Any, *, done: Callable[[str], None],
                 failed: Callable[[BaseException], None]) -> None:
        super().__init__(parent)
        self.parent_widget, self.runner, self.services, self.done, self.failed = parent, runner, services, done, failed
        self.dialog: ForgetAllDialog | None = None
        self.backup: Path | None = None
        self.forget = QPushButton("Forget everything…")
        self.forget.clicked.connect(self.ask)
        self.bring_back = QPushButton("Bring it back")
        self.bring_back.setToolTip("Put back everything from the backup saved before it was forgotten")
        self.bring_back.setVisible(False)
        self.bring_back.clicked.connect(self.restore)

    def ask(self) -> None:
        """Count what would go (db lane), then ask for the typed word; the dialog erases nothing by itself."""
        self.runner.submit("db", lambda: wipe.describe(wipe.counts(self.services.db)), on_done=self._open,
                           on_error=self.failed)

    def _open(self, erased: str) -> None:
        self.dialog = ForgetAllDialog(self.parent_widget, erased)
        self.dialog.accepted.connect(self.erase)
        self.dialog.open()  # window-modal, and the event loop keeps running

    def erase(self) -> None:
        self.runner.submit("db", lambda: self.services.manager().forget_everything(), on_done=self._erased,
                           on_error=self.failed)

    def _erased(self, result: wipe.WipeResult) -> None:
        self.backup = result.backup
        self.bring_back.setVisible(True)
        self.done(f"Erased {result.summary()}. A backup of everything was saved first: {result.backup}. "
                  "Bring it back undoes this.")

    def restore(self) -> None:
        backup = self.backup
        if backup is None:
            return
        self.runner.submit("db", lambda: wipe.bring_back(self.services.db, backup), on_done=self._restored,
                           on_error=self.failed)

    def _restored(self, counted: dict[str, int]) -> None:
        self.bring_back.setVisible(False)
        self.done(f"Brought back {wipe.describe(counted)}.")
