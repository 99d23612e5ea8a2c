"""The chat's model: its name in the header (a click opens Models) and, when there is none to answer with, a banner
that says so and leads to the Models panel. Whether the chosen model can be found is checked off the GUI thread."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton

from app.services.platform import this_machine
from app.ui.plain_text import button_text
from core.errors import EngramError


def model_name(services: Any) -> str:
    """The active model as a person knows it: the last part of its folder or repository name."""
    engine = services.chat
    ref = str(getattr(engine, "path", "") or "") if engine is not None else services.settings.chat_model
    return ref.replace("\\", "/").rstrip("/").split("/")[-1] or ("chat model" if engine is not None else "")


def in_app_words(exc: BaseException) -> str:
    """An error as it reads in the window: a missing model leads to the Models panel, not to a command line."""
    return getattr(exc, "in_app", "") or str(exc) or type(exc).__name__


def load_problem(what: str, exc: BaseException) -> str:
    """A failed load in words a person can act on: Engram's own message, else the first line of what went wrong,
    never an exception's class name."""
    if isinstance(exc, EngramError):
        return str(exc)
    detail = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else "its files could not be read"
    return f"Could not load {what}: {detail}."


NAME_WIDTH = 170  # pixels: a long model name ends in "…" in its middle and leaves the conversation's title room
BUTTON_TIP = "The model answering here: its arrow switches to another, a click opens Models"


class ModelNotice(QObject):
    open_models = Signal()

    def __init__(self, services: Any, runner: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.button = QToolButton()
        self.button.setAutoRaise(True)
        self.button.clicked.connect(self.open_models)
        self.banner = QFrame()
        self.banner.setFrameShape(QFrame.Shape.StyledPanel)
        self.text = QLabel("")
        self.text.setWordWrap(True)
        self.models_button = QPushButton("Open Models")
        self.models_button.clicked.connect(self.open_models)
        row = QHBoxLayout(self.banner)
        row.addWidget(self.text, 1)
        row.addWidget(self.models_button)
        self.banner.setVisible(False)
        self.problem_for = ""  # the chosen model that is installed but would not load: its banner stays up
        self.show_name()

    def show_name(self) -> None:
        name = model_name(self.services)
        shown = self.button.fontMetrics().elidedText(name, Qt.TextElideMode.ElideMiddle, NAME_WIDTH) if name else ""
        self.button.setText(button_text(f"Model: {shown}") if name else "No model")  # a folder may hold "&"
        self.button.setToolTip(f"{name}\n{BUTTON_TIP}" if name else BUTTON_TIP)

    def check(self) -> None:
        """Name the model, and show the banner when the chosen one cannot be found (hide it once it can)."""
        self.show_name()
        if self.services.chat is not None:
            return
        ref = self.services.settings.chat_model
        self.runner.submit("io", lambda: self.services.model_store().resolve(ref),
                           on_done=lambda _path: self.banner.setVisible(bool(ref) and self.problem_for == ref),
                           on_error=lambda exc: self.show_missing(in_app_words(exc)))

    def show_missing(self, detail: str) -> None:
        text = (f"No chat model is installed yet. Engram runs its model on {this_machine()}: download one in "
                "Models, then come back here.")
        if self.services.settings.chat_model:  # one was chosen but cannot be used: say why
            text += f"\n({detail})"
        self.text.setText(text)
        self.banner.setVisible(True)

    def show_problem(self, text: str) -> None:
        """The chosen model is installed but would not load: say why, with the way to Models."""
        self.problem_for = self.services.settings.chat_model
        self.text.setText(text)
        self.banner.setVisible(True)
