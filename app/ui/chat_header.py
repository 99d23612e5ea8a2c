"""The chat's header: the conversation's title, the model answering (its name opens Models; its arrow lists every
usable model to switch to), incognito and the memory dial — with the model's banner and background loading that
belong to it.

The models listed are those the Models panel lists as installed (ModelStore.usable, named as in the curated
catalogue), read on the io lane. Choosing one writes only `chat_model` (update_settings merges that one field into
settings.json as it is on disk) and applies it through the window, whose settings_changed reloads the model in the
background (app/ui/chat_warmup.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QMenu, QSizePolicy, QToolButton, QWidget

from app.ui.chat_model import ModelNotice
from app.ui.chat_warmup import Warmup
from app.ui.panel_widgets import ElidedLabel
from core.config import update_settings

DIALS = ("off", "light", "normal", "eager")


@dataclass(frozen=True)
class ModelChoice:
    ref: str  # what settings.chat_model holds for it: a repo id, or a folder's path
    name: str  # as the Models panel names it


def usable_choices(store: Any, active: str) -> list[ModelChoice]:
    """Every model Engram can chat with here, named as the Models panel names it (io lane: it reads the disk)."""
    from models.registry import CURATED
    names = {info.repo_id: info.name for info in CURATED}
    return [ModelChoice(m.repo_id, names.get(m.repo_id) or (m.name if m.local else m.repo_id.rsplit("/", 1)[-1]))
            for m in store.usable(active)]


class ChatHeader(QWidget):
    chose_model = Signal(str)  # the ref written to settings.json as chat_model

    def __init__(self, services: Any, runner: Any, window: Any) -> None:
        super().__init__()
        self.services = services
        self.runner = runner
        self.window_ = window
        self.model = ModelNotice(services, runner, self)
        self.model.open_models.connect(lambda: window.show_panel("models"))
        self.warmup = Warmup(services, runner, window, self)  # the models load from the window's show
        self.choices: list[ModelChoice] = []
        self.menu = QMenu(self)
        self.menu.aboutToShow.connect(self.reload_choices)  # the next look is fresh (a model added meanwhile)
        self.model.button.setMenu(self.menu)
        # the name opens Models, the arrow switches
        self.model.button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        self.title = ElidedLabel("New conversation")
        self.title.setStyleSheet("font-size: 15px; font-weight: 600;")
        # a long title never widens the window
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.incognito = QCheckBox("Incognito")
        self.incognito.setToolTip("Nothing from these messages is stored or learned")
        self.dial = QComboBox()
        self.dial.addItems(DIALS)
        self.dial.setCurrentText(services.settings.memory_dial if services.settings.memory_dial in DIALS
                                 else "normal")
        self.dial.setToolTip("How much Engram recalls for each reply: off uses no memories at all")
        # this conversation's own system prompt, as LM Studio and Jan have; shown beside Send (the header's row is
        # the title's)
        self.instructions_button = QToolButton()
        self.instructions_button.setText("Instructions…")
        self.instructions_button.setAutoRaise(True)
        bar = QHBoxLayout(self)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.title, 1)
        bar.addWidget(self.model.button)
        bar.addWidget(self.incognito)
        bar.addWidget(QLabel("Memory:"))
        bar.addWidget(self.dial)
        self._fill_menu()

    def check_model(self) -> None:
        """Name the model; show the way to Models when there is none to answer with; list the ones to switch to."""
        self.model.check()
        self.reload_choices()

    def reload_choices(self) -> None:
        active = self.services.settings.chat_model
        try:
            self.runner.submit("io", lambda: usable_choices(self.services.model_store(), active),
                               on_done=self.show_choices, on_error=lambda _exc: None)  # the menu keeps its list
        except RuntimeError:  # the lanes are shut down: the window is closing
            return

    def show_choices(self, choices: Sequence[ModelChoice]) -> None:
        self.choices = list(choices)
        self._fill_menu()

    def _fill_menu(self) -> None:
        self.menu.clear()
        group = QActionGroup(self.menu)
        active = self.services.settings.chat_model
        for choice in self.choices:
            action = QAction(choice.name, self.menu, checkable=True, checked=choice.ref == active)
            action.setToolTip(choice.ref)
            action.triggered.connect(lambda _checked=False, ref=choice.ref: self.choose(ref))
            group.addAction(action)
            self.menu.addAction(action)
        if not self.choices:
            self.menu.addAction("No model installed yet").setEnabled(False)
        self.menu.addSeparator()
        self.menu.addAction("Manage models…", lambda: self.window_.show_panel("models"))

    def choose(self, ref: str) -> None:
        """Chat with another model: only `chat_model` is written; the window applies it and the model reloads in
        the background."""
        if ref == self.services.settings.chat_model:
            return
        settings = update_settings(self.services.data_dir, {"chat_model": ref})
        apply = getattr(self.window_, "apply_settings", None)
        if apply is not None:
            apply(settings)  # Models and Settings follow; settings_changed starts the load
        else:
            self.services.settings = settings
        self.model.show_name()
        self._fill_menu()
        self.chose_model.emit(ref)
