"""The chat's models load in the background from the moment the window is shown, and again when another chat model
is chosen: the embedder on the db lane, where recall runs, and the chat model on the model lane, where it streams.

A reply sent meanwhile is accepted at once: each lane runs one job at a time, so its steps simply queue behind the
load. Until the load ends, the reply says what it waits for (waiting_text) instead of "Recalling…".
"""
from __future__ import annotations

from typing import Any, Callable

from PySide6.QtCore import QEvent, QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from app.ui.chat_model import load_problem, model_name
from core.errors import ModelError


class Warmup(QObject):
    changed = Signal()  # a load started or ended: a waiting reply's words change
    failed = Signal(str, str)  # what ("embedder" or "chat") and why, in plain words: once per model choice

    def __init__(self, services: Any, runner: Any, window: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.loading: dict[str, str] = {}  # "embedder" / "chat" -> the name of the model being loaded
        self._failed: set[tuple[str, str]] = set()  # loads that failed: not tried, nor shown, again for that choice
        self._closed = False
        if isinstance(window, QWidget):
            window.installEventFilter(self)  # the first Show starts the loads (a window never shown loads nothing)
        settings_changed = getattr(window, "settings_changed", None)
        if settings_changed is not None:
            settings_changed.connect(lambda _settings: self.start())  # another chat model may have been chosen

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Show:
            watched.removeEventFilter(self)
            QTimer.singleShot(0, self.start)  # once the window is on screen
        return False

    def start(self) -> None:
        """Load whatever the next reply needs and is not loaded yet; nothing while no chat model is chosen."""
        services = self.services
        if self._closed or (services.chat is None and not services.settings.chat_model):
            return
        if not services.embedder_loaded:
            self._load("embedder", services.settings.embedder, "db", lambda: services.embedder)
        if not services.chat_loaded():
            self._load("chat", model_name(services), "model", self._load_chat)

    def waiting_text(self) -> str:
        """What a reply sent now waits for, in plain words; empty when nothing is loading."""
        chat, embedder = self.loading.get("chat"), "embedder" in self.loading
        if chat and embedder:
            return f"Loading the embedding model and {chat}… (first reply after them)"
        if chat:
            return f"Loading {chat}… (first reply after it)"
        return "Loading the embedding model…" if embedder else ""

    def stop(self) -> None:
        self._closed = True

    def _load_chat(self) -> Any:
        services = self.services
        try:
            services.chat_model_folder()
        except ModelError:
            return None  # not installed: the model banner already says so and leads to Models
        return services.chat_engine(adapter_db=services.learning_db)  # as a turn asks for it, adapter included

    def _load(self, what: str, name: str, lane: str, load: Callable[[], Any]) -> None:
        if what in self.loading or (what, name) in self._failed:
            return
        try:
            self.runner.submit(lane, load, on_done=lambda _result: self._done(what, name),
                               on_error=lambda exc: self._fail(what, name, exc))
        except RuntimeError:  # the lanes were shut down: the window is closing
            return
        self.loading[what] = name
        self.changed.emit()

    def _done(self, what: str, name: str) -> None:
        self.loading.pop(what, None)
        self.changed.emit()
        if what == "chat" and name != model_name(self.services):
            self.start()  # another chat model was chosen while this one loaded

    def _fail(self, what: str, name: str, exc: BaseException) -> None:
        self.loading.pop(what, None)
        self._failed.add((what, name))
        self.changed.emit()
        if not self._closed:
            self.failed.emit(what, load_problem("the embedding model" if what == "embedder" else name, exc))
