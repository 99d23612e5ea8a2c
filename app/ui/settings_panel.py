"""Settings: data folder, model, embedder, scheduler windows, forgetting strength, memory dial; About.

Saving checks the chosen chat and embedding models off the GUI thread first: a name that does not resolve on this
machine is refused with the reason, and nothing is written.
"""
from __future__ import annotations

import platform
import sys
import threading
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import Qt, QTime, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QFrame, QGroupBox, QHBoxLayout,
                               QLabel, QLineEdit, QMessageBox, QPushButton, QScrollArea, QTimeEdit, QVBoxLayout,
                               QWidget)

from app.services.platform import this_machine
from app.services.reembed import reembed_store
from app.ui.connected_apps import ConnectedApps
from app.ui.chat_model import in_app_words
from app.ui.theme import APPEARANCE_LABELS, APPEARANCES, SPACING
from core.config import (ForgettingSettings, SchedulerSettings, Settings, settings_changes, update_settings,
                         with_changes)
from core.words import counted

COLUMN_WIDTH = 760  # pixels: the form's widest; wider windows leave the rest empty, as macOS settings do
DIAL_CHOICES = ("off", "light", "normal", "eager")
FORGETTING_CHOICES = ("gentle", "normal", "strong")
VERSIONED = ("engram", "mlx", "mlx-lm", "apsw", "sqlite-vec", "sentence-transformers", "PySide6-Essentials",
             "pyqtgraph", "llguidance")


def package_versions() -> dict[str, str]:
    """Installed versions, read from metadata so nothing heavy is imported."""
    found = {"Python": platform.python_version(), "platform": f"{sys.platform} {platform.machine()}"}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = source_version() if name == "engram" else "not installed"
    return found


def source_version() -> str:
    """Engram's own version when it runs from a source checkout (not pip-installed): pyproject.toml's."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        version = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
    return f"{version} (source)"


def _api_server(context: Any) -> Any:
    """The window's in-app server (app.serve.in_app), None for a panel without a window."""
    from app.serve.in_app import attach
    return attach(context.window) if getattr(context, "window", None) is not None else None


def check_models(services: Any, changes: dict[str, Any]) -> None:
    """Raises a ModelError naming the problem when a chat or embedding model the user chose is not on this machine."""
    if changes.get("chat_model"):
        services.model_store().resolve(changes["chat_model"])
    if "embedder" in changes:
        services.load_embedder(changes["embedder"])  # on the process's MLX thread when it runs on mlx.nn


class SettingsPanel(QWidget):
    saved = Signal(bool)  # True once written; False when the models did not check out

    def __init__(self, context: Any) -> None:
        super().__init__()
        self.context = context
        self.services = context.services
        self.runner = context.runner
        self.confirm: Callable[[str], bool] = self._ask  # replaced in tests
        column = QWidget()
        column.setMaximumWidth(COLUMN_WIDTH)  # a form reads best in one column of comfortable width
        layout = QVBoxLayout(column)
        layout.setContentsMargins(SPACING.l, SPACING.l, SPACING.l, SPACING.l)
        layout.setSpacing(SPACING.m)
        layout.addWidget(self._general_box())
        layout.addWidget(self._scheduler_box())
        # What forgetting learnt from the user's restores (core.memory.learned), and what recall learnt from the
        # memories removed, pinned and rated (core.memory.recall_learning): each with a way back to the defaults.
        forgetting_box, self.learned_label, self.reset_learned_button = self._learnt_box(
            "What forgetting learnt from you", lambda: self._show_learned(reset=True))
        recall_box, self.recall_learned_label, self.reset_recall_button = self._learnt_box(
            "What recall learnt from you", lambda: self._show_recall_learned(reset=True))
        layout.addWidget(forgetting_box)
        layout.addWidget(recall_box)
        # app.ui.connected_apps: the switch that serves the memory (app.serve.in_app), the grants and their log
        self.connected_apps = ConnectedApps(self.services.data_dir, _api_server(context), self.services)
        layout.addWidget(self.connected_apps)
        self.save_button = QPushButton("Save settings")
        self.save_button.clicked.connect(self.save)
        self.saved_label = QLabel("")
        layout.addWidget(self.save_button, 0, Qt.AlignmentFlag.AlignRight)
        layout.addWidget(self.saved_label)
        layout.addWidget(self._about_box())
        layout.addStretch(1)
        self._scrolling(column)
        self.baseline = self.services.settings  # what the fields showed before the user touched them
        self.reembed_stop = threading.Event()  # set when the window closes: a re-embedding gives up, changing nothing
        self.load(self.services.settings)

    def shutdown(self) -> None:
        self.reembed_stop.set()

    def _scrolling(self, column: QWidget) -> None:
        """The column at the panel's left, scrolling when the window is shorter than the form."""
        holder = QWidget()
        row = QHBoxLayout(holder)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(column, 1)
        row.addStretch(0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(holder)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)

    def _general_box(self) -> QGroupBox:
        box = QGroupBox("General")
        form = QFormLayout(box)
        self.data_dir = QLabel("")
        self.data_dir.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.data_dir.setToolTip("Everything Engram knows is in engram.db here. To keep it elsewhere, start "
                                 "Engram with ENGRAM_HOME set to another folder.")
        self.open_url = QDesktopServices.openUrl  # replaced in tests
        self.show_folder_button = QPushButton("Show in Finder" if sys.platform == "darwin" else "Open folder")
        self.show_folder_button.clicked.connect(
            lambda: self.open_url(QUrl.fromLocalFile(str(self.services.data_dir))))
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.data_dir, 1)
        folder_row.addWidget(self.show_folder_button)
        self.chat_model = QComboBox()
        self.chat_model.setEditable(True)  # an installed model, or the path of a local MLX model folder
        editor = self.chat_model.lineEdit()
        if editor is not None:  # an editable combo box always has one
            editor.setPlaceholderText("download one in Models")
        self.embedder = QLineEdit()
        self.dial = QComboBox()
        self.dial.addItems(DIAL_CHOICES)
        self.forgetting = QComboBox()
        self.forgetting.addItems(FORGETTING_CHOICES)
        form.addRow("Appearance", self._appearance_choice())
        form.addRow("Data folder", folder_row)
        form.addRow("Chat model", self.chat_model)
        form.addRow("Embedding model", self.embedder)
        form.addRow("Memory dial", self.dial)
        form.addRow("Forgetting strength", self.forgetting)
        return box

    def _appearance_choice(self) -> QComboBox:
        """System / Light / Dark: applied and saved the moment it is chosen, like the system's own switch."""
        self.appearance = QComboBox()
        for key in APPEARANCES:
            self.appearance.addItem(APPEARANCE_LABELS[key], key)
        self.appearance.setToolTip(f"System follows the light or dark mode of {this_machine()}.")
        self.appearance.currentIndexChanged.connect(self._appearance_chosen)
        return self.appearance

    def _appearance_chosen(self, index: int) -> None:
        key = self.appearance.itemData(index)
        if key is None or key == self.services.settings.appearance:
            return
        try:
            settings = update_settings(self.services.data_dir, {"appearance": key})  # the one field, merged
        except OSError as exc:
            self.saved_label.setText(f"Could not save the appearance: {exc}")
            return
        self.baseline = self.baseline.replace(appearance=key)  # other unsaved edits stay pending
        apply = getattr(self.context.window, "apply_settings", None)
        if apply is not None:
            apply(settings)  # the theme, and every panel, follow at once
        else:
            self.services.settings = settings

    def _scheduler_box(self) -> QGroupBox:
        box = QGroupBox("Idle-time work")
        form = QFormLayout(box)
        self.idle_minutes = QDoubleSpinBox()
        self.idle_minutes.setRange(1, 240)
        self.idle_minutes.setSuffix(" min")
        self.quiet_start = QTimeEdit()
        self.quiet_end = QTimeEdit()
        for edit in (self.quiet_start, self.quiet_end):
            edit.setDisplayFormat("HH:mm")
        self.require_ac = QCheckBox("Only on AC power")
        form.addRow("Start after idle for", self.idle_minutes)
        form.addRow("Fine-tune from", self.quiet_start)
        form.addRow("until", self.quiet_end)
        form.addRow("", self.require_ac)
        return box

    @staticmethod
    def _learnt_box(title: str, on_reset: Callable[[], None]) -> tuple[QGroupBox, QLabel, QPushButton]:
        """A box saying in words what was learnt, with its reset button."""
        box = QGroupBox(title)
        row = QHBoxLayout(box)
        label = QLabel("")
        label.setWordWrap(True)
        reset = QPushButton("Reset to defaults")
        reset.clicked.connect(on_reset)
        row.addWidget(label, 1)
        row.addWidget(reset)
        return box, label, reset

    def _show_learned(self, reset: bool = False) -> None:
        from core.memory import learned

        def read() -> str:
            if reset:
                learned.reset(self.services.db)
            return learned.describe(self.services.db, self.services.settings)
        self.runner.submit("db", read, on_done=self.learned_label.setText,
                           on_error=lambda exc: self.learned_label.setText(f"Could not read the learnt weights: {exc}"))

    def _show_recall_learned(self, reset: bool = False) -> None:
        from core.memory import recall_learning

        def read() -> str:
            if reset:
                recall_learning.reset(self.services.db)
            else:  # pins made since the last reply are counted
                recall_learning.collect_pins(self.services.db, self.services.settings)
            return recall_learning.describe_plainly(self.services.db, self.services.settings)
        self.runner.submit("db", read, on_done=self.recall_learned_label.setText,
                           on_error=lambda exc: self.recall_learned_label.setText(f"Could not read it: {exc}"))

    def _about_box(self) -> QGroupBox:
        box = QGroupBox("About Engram")
        form = QFormLayout(box)
        for name, version in package_versions().items():
            form.addRow(name, QLabel(version))
        return box

    def follow(self, settings: Settings) -> None:
        """The settings changed outside this panel (a CLI, a hand edit): show them, keeping the user's own
        unsaved edits on top."""
        pending = settings_changes(self.baseline, self.current())
        self.load(with_changes(settings, pending) if pending else settings)
        self.baseline = settings

    def load(self, settings: Settings) -> None:
        self.data_dir.setText(str(self.services.data_dir))
        self.appearance.blockSignals(True)  # showing the setting is not choosing it
        self.appearance.setCurrentIndex(max(0, self.appearance.findData(settings.appearance)))
        self.appearance.blockSignals(False)
        self.chat_model.setCurrentText(settings.chat_model)
        self._list_installed()
        self.embedder.setText(settings.embedder)
        self.dial.setCurrentText(settings.memory_dial if settings.memory_dial in DIAL_CHOICES else "normal")
        self.forgetting.setCurrentText(settings.forgetting.strength)
        self.idle_minutes.setValue(settings.scheduler.idle_minutes)
        self.quiet_start.setTime(QTime.fromString(settings.scheduler.quiet_hours_start, "HH:mm"))
        self.quiet_end.setTime(QTime.fromString(settings.scheduler.quiet_hours_end, "HH:mm"))
        self.require_ac.setChecked(settings.scheduler.require_ac_power)

    def current(self) -> Settings:
        """The fields as they are now, over the settings they were loaded from."""
        old = self.baseline
        scheduler = SchedulerSettings(idle_minutes=self.idle_minutes.value(),
                                      quiet_hours_start=self.quiet_start.time().toString("HH:mm"),
                                      quiet_hours_end=self.quiet_end.time().toString("HH:mm"),
                                      require_ac_power=self.require_ac.isChecked())
        forgetting = ForgettingSettings(**{**old.forgetting.__dict__, "strength": self.forgetting.currentText()})
        return old.replace(chat_model=self.chat_model.currentText().strip(), embedder=self.embedder.text().strip()
                           or old.embedder, memory_dial=self.dial.currentText(), scheduler=scheduler,
                           forgetting=forgetting)

    def _list_installed(self) -> None:
        def fill(models: list[Any]) -> None:
            current = self.chat_model.currentText()
            self.chat_model.clear()
            self.chat_model.addItems([m.repo_id for m in models])
            self.chat_model.setCurrentText(current)
        # the db lane, not io: a download can hold the io lane for many minutes; a folder listing is quick
        self.runner.submit("db", lambda: self.services.model_store().installed(), on_done=fill,
                           on_error=lambda exc: self.saved_label.setText(f"Could not list the models: {exc}"))

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        self._list_installed()  # a model downloaded meanwhile is offered
        self._show_learned()  # restores made meanwhile are counted
        self._show_recall_learned()
        self.connected_apps.refresh()  # an app granted or served meanwhile

    def save(self) -> None:
        """Write only what the user changed here, merged into the file as it is now: a field changed elsewhere
        meanwhile (`engram models use`) is kept."""
        changes = settings_changes(self.baseline, self.current())
        if not changes:
            self.saved_label.setText("Nothing to save: no setting was changed.")
            self.saved.emit(True)
            return
        self.save_button.setEnabled(False)
        self.saved_label.setText("Checking the models…")
        self.runner.submit("db", check_models, self.services, changes, on_done=lambda _: self._checked(changes),
                           on_error=self._refused)

    def _checked(self, changes: dict[str, Any]) -> None:
        """A new embedding model is used only once every memory and turn is embedded with it (recall compares
        vectors of one model): the user says yes to that first; no keeps the old one and saves the rest."""
        if "embedder" not in changes:
            self._write(changes)
            return
        new, old = changes["embedder"], self.baseline.embedder
        if not self.confirm(f"Switch the embedding model to {new}? Engram first embeds every memory and "
                            f"conversation turn again with it (minutes for a large store); the chat goes on "
                            f"with {old} meanwhile, and quitting stops it with nothing changed."):
            rest = {key: value for key, value in changes.items() if key != "embedder"}
            self._write(rest, f" The embedding model stays {old}.")
            return
        self.saved_label.setText(f"Embedding your memories again with {new}…")
        self.runner.submit("bulk", reembed_store, self.services, new, self.reembed_stop, on_error=self._refused,
                           on_done=lambda done: self._write(changes, _reembed_words(done, new)))

    def _write(self, changes: dict[str, Any], note: str = "") -> None:
        settings = update_settings(self.services.data_dir, changes)
        self.baseline = settings
        apply = getattr(self.context.window, "apply_settings", None)
        if apply is not None:
            apply(settings)  # the services and the other panels (Chat, Models) follow at once
        else:
            self.services.settings = settings
        self.load(settings)
        self.save_button.setEnabled(True)
        self.saved_label.setText(("Saved." if changes else "Nothing saved.") + note)
        self.saved.emit(True)

    def _ask(self, question: str) -> bool:
        button = QMessageBox.StandardButton
        answer = QMessageBox.question(self, "Engram", question, button.Yes | button.Cancel, button.Cancel)
        return answer == button.Yes

    def _refused(self, exc: BaseException) -> None:
        self.save_button.setEnabled(True)
        self.saved_label.setText(f"Not saved: {in_app_words(exc)}")
        self.saved.emit(False)


def _reembed_words(done: int, name: str) -> str:
    return f" {counted(done, 'memory or turn', 'memories and turns')} embedded with {name}; it is the one in use."
