"""Every label and tooltip shows its text as plain text unless the code made it rich on purpose.

A QLabel (and the label behind a tooltip or a message box) guesses: text whose first tag looks like HTML is
rendered as HTML, and an `<img src="/dev/zero">` in it is read as an image file for ever (the window hung, its
memory grew without end). Memory statements, conversation titles, hypotheses and errors are data — a pasted page
or a hostile import puts markup there — so the guess is switched off for the whole application: at the moment a
label is first polished, one still left to guess (Qt.AutoText) is made plain; labels that show our own markup set
Qt.RichText explicitly (the welcome screen, About).
"""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel

GUARD_NAME = "engram-plain-text-guard"


class PlainTextGuard(QObject):
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # isinstance first: this filter sees every event of the application, and reading an event's type from
        # Python builds an enum (a large share of the GUI thread's time building a reply's widgets)
        if (isinstance(watched, QLabel) and event.type() == QEvent.Type.Polish
                and watched.textFormat() == Qt.TextFormat.AutoText):
            watched.setTextFormat(Qt.TextFormat.PlainText)
        return False


def guard_plain_text(app: Any = None) -> None:
    """Install the guard on the application once (windows and tests call it; a second call does nothing)."""
    app = app or QCoreApplication.instance()
    if app is None or app.findChild(PlainTextGuard, GUARD_NAME) is not None:
        return
    guard = PlainTextGuard(app)
    guard.setObjectName(GUARD_NAME)
    app.installEventFilter(guard)


def button_text(text: str) -> str:
    """Data shown on a button as it is: a button reads "&" as its shortcut's mark ("Tom &Jerry" shows "Tom Jerry" and
    answers Alt+J), so a memory's or a turn's "&" is doubled."""
    return text.replace("&", "&&")
