"""Models: the curated registry with fit pills, download with progress, pause, resume and cancel, installed models,
the active one.

Fit is measured against what a model may use here (models.budget: on a Mac what the GPU may use, elsewhere the memory
free) and shown as a coloured pill; the model recommended for this machine is marked, and on a first start with no
model installed the panel offers it.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QHBoxLayout, QHeaderView, QLabel, QProgressBar,
                               QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.services.platform import this_machine
from app.ui.fit_pill import FitPillDelegate
from app.ui.model_rows import (FIT_COLUMN, STATUS_COLUMN, columns, convert_gguf, gguf_supported, human_bytes,
                               other_row, progress_text, status_text)
from core.config import update_settings
from models.speed import speed_words


MEASURE_AFTER_MS = 3000  # the machine's speed is measured this long after the panel first loads

class ModelsPanel(QWidget):
    refreshed = Signal()
    download_finished = Signal(bool)  # True when installed
    added = Signal(bool)  # "Add a model…": True when the folder was added

    def __init__(self, context: Any) -> None:
        super().__init__()
        self.context = context
        self.services = context.services
        self.runner = context.runner
        self.catalog: list[Any] = []
        self.installed: dict[str, Any] = {}
        self.recommended: Any = None
        self.paces: dict[str, Any] = {}  # repo id -> estimated tokens a second here (models.speed)
        self.total_ram = 0  # the memory budget a model may use here (models.budget)
        self.budget: Any = None
        self.cancel_event: threading.Event | None = None
        self.pause_event: threading.Event | None = None
        self.paused_repo: str | None = None  # a paused download: Resume continues it, Cancel throws it away
        self._build()
        self.refresh()

    def _build(self) -> None:
        self.banner = QLabel("")
        self.banner.setWordWrap(True)
        self.banner.setVisible(False)
        self.budget_label = QLabel("")
        self.budget_label.setWordWrap(True)
        labels = columns()
        self.table = QTableWidget(0, len(labels))
        self.table.setHorizontalHeaderLabels(labels)
        size_header = self.table.horizontalHeaderItem(3)
        if size_header is not None:  # made by setHorizontalHeaderLabels just above
            size_header.setToolTip("What a download fetches; for a model on this computer, its size on disk")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # each figure and its header whole ...
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # ... and the model's name the rest
        self.table.verticalHeader().setVisible(False)
        self.table.setItemDelegateForColumn(FIT_COLUMN, FitPillDelegate(self.table))
        self.buttons = {}
        row = QHBoxLayout()
        for name, label in (("download", "Download"), ("pause", "Pause"), ("resume", "Resume"),
                            ("cancel", "Cancel download"), ("use", "Use this model"),
                            ("settings", "Model settings…"), ("remove", "Remove"), ("add", "Add a model…")):
            button = QPushButton(label)
            button.clicked.connect(getattr(self, f"on_{name}"))
            self.buttons[name] = button
            row.addWidget(button)
        if gguf_supported():
            self.buttons["add_gguf"] = QPushButton("Add a GGUF file…")
            self.buttons["add_gguf"].clicked.connect(self.on_add_gguf)
            row.addWidget(self.buttons["add_gguf"])
        row.addStretch(1)
        for name in ("pause", "resume", "cancel"):
            self.buttons[name].setEnabled(False)
        self.buttons["resume"].setVisible(False)
        self.buttons["settings"].setToolTip("Temperature, top-p, the longest reply and the context length of the "
                                            "selected model (its own defaults until you change them)")
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.banner)
        layout.addWidget(self.budget_label)
        layout.addWidget(self.table, 1)
        layout.addLayout(row)
        layout.addWidget(self.progress)
        layout.addWidget(self.message)

    # --- data -------------------------------------------------------------------------------------------
    _measure_speed = False  # the first load reads only a cached speed; measuring (MLX loads) waits for the window

    def refresh(self) -> None:
        def load() -> tuple:
            from models.budget import memory_budget
            from models.registry import CURATED, default_model
            from models.speed import machine_speed, probe_bandwidth
            budget = memory_budget()
            installed = {m.repo_id: m for m in self.services.model_store().usable(self.services.settings.chat_model)}
            curated = {info.repo_id for info in CURATED}
            others = [(m, other_row(m, budget.bytes)) for m in installed.values() if m.repo_id not in curated]
            speed = machine_speed(self.services.data_dir,  # measured once, cached: a model's pace here
                                  probe=lambda: self.services.mlx_worker.call(probe_bandwidth),  # MLX's thread
                                  measure=self._measure_speed)
            paces = {i.repo_id: speed.model_pace(i) for i in CURATED} if speed is not None else {}
            return list(CURATED), installed, default_model(budget.bytes, speed=speed), budget, others, paces
        self.runner.submit("io", load, on_done=self._on_loaded, on_error=self._on_error)

    def _on_loaded(self, loaded: tuple) -> None:
        from models.budget import budget_words
        from models.registry import fit
        self.catalog, self.installed, self.recommended, self.budget, others, self.paces = loaded
        if not self.paces and not self._measure_speed:  # not measured on this machine yet: once the window is up
            self._measure_speed = True
            QTimer.singleShot(MEASURE_AFTER_MS, self, self.refresh)
        self.total_ram = self.budget.bytes
        self.budget_label.setText(f"Fit is measured against {budget_words(self.budget, this_machine())}.")
        active = self.services.settings.chat_model
        recommended = self.recommended.repo_id if self.recommended is not None else None
        rows = [(info.repo_id, (info.name, info.family, f"{info.params_b:g}B", human_bytes(info.size_bytes),
                                f"{info.context_length:,}", human_bytes(info.ram_bytes),
                                fit(info.ram_bytes, self.total_ram), "installed" if info.repo_id in self.installed
                                else "")) for info in self.catalog]
        rows += [(model.repo_id, values[:-1] + ("folder" if model.local else "installed",))
                 for model, values in others]
        selected = self.selected_repo()
        self.table.setRowCount(len(rows))
        for row, (repo_id, values) in enumerate(rows):
            if repo_id == active:
                values = values[:-1] + ("active",)
            cells = values[:-1] + (status_text(values[-1], repo_id == recommended),
                                   speed_words(self.paces.get(repo_id)))
            for column, value in enumerate(cells):
                item = QTableWidgetItem(value)
                item.setData(Qt.ItemDataRole.UserRole, repo_id)
                if repo_id == recommended and column in (0, STATUS_COLUMN):
                    font = item.font()
                    font.setBold(True)  # the recommended row stands out in either scheme, no colour needed
                    item.setFont(font)
                self.table.setItem(row, column, item)
        if selected is not None:
            self.select_repo(selected)
        self._update_banner()
        self.refreshed.emit()

    def _update_banner(self) -> None:
        first_start = not self.installed and not self.services.settings.chat_model
        if first_start and self.recommended is not None:
            from models.budget import budget_words
            self.banner.setText(
                f"Engram needs a language model to chat. Recommended for {this_machine()} "
                f"({budget_words(self.budget, this_machine())}): {self.recommended.name}, a "
                f"{human_bytes(self.recommended.size_bytes)} download. Select it and press Download; it stays on "
                f"{this_machine()}. Or add one you already have: a model folder with “Add a model…”"
                + (", a .gguf file with “Add a GGUF file…”." if gguf_supported() else "."))
            self.select_repo(self.recommended.repo_id)
        self.banner.setVisible(first_start)

    def selected_repo(self) -> str | None:
        items = self.table.selectedItems()
        return items[0].data(Qt.ItemDataRole.UserRole) if items else None

    def select_repo(self, repo_id: str) -> None:
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == repo_id:
                self.table.selectRow(row)

    # --- actions ----------------------------------------------------------------------------------------
    def on_download(self) -> None:
        repo_id = self.selected_repo()
        if repo_id is None:
            self.message.setText("Select a model to download.")
            return
        self._start_download(repo_id)

    def _start_download(self, repo_id: str) -> None:
        self.cancel_event, self.pause_event = threading.Event(), threading.Event()
        self.paused_repo = None
        self._downloading(True)
        self.message.setText(f"Checking {repo_id}…")
        cancel, pause = self.cancel_event, self.pause_event
        self.runner.submit("io", lambda: self.services.model_store().download(
            repo_id, progress=self._report_progress, cancel=cancel, pause=pause,
            on_retry=lambda seconds: self.runner.post(self._show_retry, seconds)),
            on_done=self._on_downloaded, on_error=lambda exc: self._on_download_error(exc, repo_id))

    def _show_retry(self, seconds: float) -> None:
        self.message.setText(f"The connection dropped; trying again in {seconds:g} s…")

    def on_pause(self) -> None:
        if self.pause_event is not None:
            self.pause_event.set()
            self.buttons["pause"].setEnabled(False)
            self.message.setText("Pausing…")

    def on_resume(self) -> None:
        """Start the paused download again: finished files are kept, the cut-off one continues from its last
        byte."""
        if self.paused_repo is not None:
            self._start_download(self.paused_repo)

    def _report_progress(self, p: Any) -> None:
        # Called on the download thread: hand the numbers to the GUI thread, never touch widgets here.
        self.runner.post(self._show_progress, p)

    def on_cancel(self) -> None:
        if self.paused_repo is not None:  # nothing running: throw the partial files away here
            repo_id, self.paused_repo = self.paused_repo, None
            self.runner.submit("io", lambda: self.services.model_store().discard_partial(repo_id),
                               on_done=lambda _freed: self._show_discarded(repo_id), on_error=self._on_error)
            return
        if self.cancel_event is not None:
            self.cancel_event.set()
            self.message.setText("Cancelling…")

    def _show_discarded(self, repo_id: str) -> None:
        self._paused(False)
        self.message.setText(f"Cancelled the download of {repo_id}; its partial files were removed.")

    def on_use(self) -> None:
        repo_id = self.selected_repo()
        if repo_id not in self.installed:
            self.message.setText("Download the model before choosing it.")
            return
        self._activate(repo_id)
        self.message.setText(f"Engram will chat with {repo_id}.")
        self.refresh()

    def _activate(self, repo_id: str) -> None:
        settings = update_settings(self.services.data_dir, {"chat_model": repo_id})  # the one field, merged
        apply = getattr(self.context.window, "apply_settings", None)
        if apply is not None:
            apply(settings)  # Chat and Settings follow at once
        else:
            self.services.settings = settings

    def on_settings(self) -> None:
        """The selected installed model's sampling (app/ui/model_settings.py)."""
        repo_id = self.selected_repo()
        if repo_id not in self.installed:
            self.message.setText("Download or add the model before changing its settings.")
            return
        from app.ui.model_settings import ModelSettingsDialog
        self.settings_dialog = ModelSettingsDialog(self.services, repo_id, Path(self.installed[repo_id].path), self)
        self.settings_dialog.accepted.connect(lambda: self.message.setText(
            f"Saved {repo_id}'s settings: its next reply uses them."))
        self.settings_dialog.open()

    def on_remove(self) -> None:
        repo_id = self.selected_repo()
        if repo_id not in self.installed:
            return

        def removed(model: Any) -> None:
            self.message.setText(f"Engram no longer lists {model.path}; its files are left as they are."
                                 if model.local else f"Removed {model.repo_id}.")
            self.refresh()
        self.runner.submit("io", lambda: self.services.model_store().remove(repo_id), on_done=removed,
                           on_error=self._on_error)

    def on_add(self) -> None:
        """A folder of MLX weights from anywhere on disk: checked, remembered by the model store, listed."""
        folder = QFileDialog.getExistingDirectory(self, "Add a model: choose a folder of MLX weights")
        if folder:
            self.add_folder(folder)

    def add_path(self, path: str) -> None:
        """A folder or a .gguf file given some other way (dropped on the window): added as its button would."""
        if Path(path).is_dir():
            self.add_folder(path)
        elif Path(path).suffix.lower() == ".gguf" and gguf_supported():
            self.add_gguf(path)
        else:
            self._on_add_refused(ValueError(f"{Path(path).name} is neither a model folder nor a .gguf file."))

    def add_folder(self, folder: str) -> None:
        self.message.setText(f"Checking {folder}…")
        self.runner.submit("io", lambda: self._sized_store().add_folder(folder), on_done=self._on_added,
                           on_error=self._on_add_refused)

    def _sized_store(self) -> Any:
        """The model store told this machine's memory, so a model too big to run is refused when it is added."""
        from models.budget import memory_budget
        store = self.services.model_store()
        if getattr(store, "total_ram", None) is None:
            store.total_ram = memory_budget().bytes or None
        return store

    def on_add_gguf(self) -> None:
        """A .gguf file (LM Studio's and Jan's format), converted to MLX here with progress."""
        path, _ = QFileDialog.getOpenFileName(self, "Add a model: choose a GGUF file", "", "GGUF model (*.gguf)")
        if path:
            self.add_gguf(path)

    def add_gguf(self, path: str) -> None:
        name = Path(path).name
        self._converting(True)
        self.message.setText(f"Converting {name} to MLX…")

        def report(stage: str, fraction: float) -> None:  # on the io lane: the GUI thread draws it
            self.runner.post(self._show_conversion, name, stage, fraction)
        def added(model: Any) -> None:
            self._converting(False)
            self._on_added(model)

        def refused(exc: BaseException) -> None:
            self._converting(False)
            self._on_add_refused(exc)
        self.runner.submit("io", lambda: convert_gguf(self._sized_store(), path, report), on_done=added,
                           on_error=refused)

    def _converting(self, active: bool) -> None:
        for name in ("add", "add_gguf", "download"):
            self.buttons[name].setEnabled(not active)
        self.progress.setMaximum(1000)
        self.progress.setValue(0)
        self.progress.setVisible(active)

    def _show_conversion(self, name: str, stage: str, fraction: float) -> None:
        self.progress.setValue(int(1000 * fraction))
        self.message.setText(f"Converting {name} to MLX: {stage} ({fraction:.0%})")

    def _on_added(self, model: Any) -> None:
        message = (f"Added {model.name} ({human_bytes(model.size_bytes)}) from {model.path}." if model.local else
                   f"Converted and installed {model.repo_id.rsplit('/', 1)[-1]} ({human_bytes(model.size_bytes)}).")
        if not self.services.settings.chat_model:  # the first model: ready to chat without another click
            self._activate(model.repo_id)
            message += " Engram chats with it now: open Chat to start."
        else:
            message += " Press “Use this model” to chat with it."
        self.message.setText(message)
        self.refresh()
        self.refreshed.connect(self._select_added(model.repo_id))
        self.added.emit(True)

    def _select_added(self, repo_id: str) -> Any:
        def select() -> None:
            self.refreshed.disconnect(select)
            self.select_repo(repo_id)
        return select

    def _on_add_refused(self, exc: BaseException) -> None:
        self.message.setText(f"Not added: {exc}")
        self.added.emit(False)

    def _downloading(self, active: bool) -> None:
        self.buttons["download"].setEnabled(not active)
        self.buttons["cancel"].setEnabled(active)
        self.buttons["pause"].setEnabled(active)
        self.buttons["resume"].setEnabled(False)
        self.buttons["resume"].setVisible(False)
        self.buttons["settings"].setToolTip("Temperature, top-p, the longest reply and the context length of the "
                                            "selected model (its own defaults until you change them)")
        self.buttons["pause"].setVisible(True)
        self.progress.setVisible(active)
        if active:
            self.progress.setValue(0)

    def _paused(self, paused: bool) -> None:
        """A paused download: Resume in Pause's place, Cancel still offered (it removes the partial files)."""
        self.buttons["pause"].setVisible(not paused)
        self.buttons["resume"].setVisible(paused)
        self.buttons["resume"].setEnabled(paused)
        self.buttons["cancel"].setEnabled(paused)
        self.buttons["download"].setEnabled(not paused)
        self.progress.setVisible(paused)

    def _show_progress(self, p: Any) -> None:
        self.progress.setMaximum(1000)
        self.progress.setValue(int(1000 * p.done_bytes / max(p.total_bytes, 1)))
        self.message.setText(progress_text(p))

    def _on_downloaded(self, model: Any) -> None:
        self._downloading(False)
        message = f"Installed {model.repo_id} ({human_bytes(model.size_bytes)})."
        if not self.services.settings.chat_model:  # the first model: ready to chat without another click
            self._activate(model.repo_id)
            message += " Engram chats with it now: open Chat to start."
        self.message.setText(message)
        self.download_finished.emit(True)
        self.refresh()

    def _on_download_error(self, exc: BaseException, repo_id: str) -> None:
        from models.download import DownloadPaused
        self._downloading(False)
        if isinstance(exc, DownloadPaused):
            self.paused_repo = repo_id
            self._paused(True)
            self.message.setText(f"{exc} Press Resume to continue where it stopped.")
        else:
            self.message.setText(str(exc))
        self.download_finished.emit(False)
        self.refresh()

    def _on_error(self, exc: BaseException) -> None:
        self.message.setText(f"Could not do that: {exc}")
