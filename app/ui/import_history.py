"""File → Import from Another Assistant…, and an export dropped onto the window (issue 39).

The file is recognised by its contents (core.importers.archive.detect_source), read and checked whole, then written
on the bulk lane over a connection of its own — minutes of embedding hold neither the window's store lane nor the
chat — with a progress dialog whose Cancel stops between chunks (importing the same file again resumes). When it
ends, the conversation list and the memory views reload and a message says what came in and what was left out.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QProgressDialog, QWidget

from core.importers.conversations import SOURCES
from core.words import counted

FILTER = "Exports from ChatGPT, Claude or Google Takeout (*.zip *.json *.txt *.md);;All files (*)"
DROPPABLE = (".zip", ".json", ".txt", ".md")


class ImportHistory(QObject):
    progressed = Signal(int, int)  # (turns written, turns to write), from the bulk lane
    finished = Signal(str)  # the summary shown to the user; for tests too

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self.stop = threading.Event()
        self.dialog: QProgressDialog | None = None
        self.tell: Callable[[str, str], None] = self._message_box  # (title, text); replaced in tests
        self.progressed.connect(self._on_progress)

    def choose(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Import from another assistant", "", FILTER)
        if path:
            self.start(path)

    def start(self, path: str | Path) -> None:
        self.stop.clear()
        self.window.runner.submit("bulk", _read, str(path), on_done=lambda read: self._write(path, *read),
                                  on_error=self._failed)

    def _write(self, path: str | Path, source: str, parsed: Any) -> None:
        if not parsed.conversations and not parsed.memories:
            self._done_with(f"There was nothing to import in {Path(path).name}.")
            return
        self.dialog = QProgressDialog(f"Importing from {SOURCES[source]}…", "Stop", 0, max(parsed.turn_count, 1),
                                      self.window)
        self.dialog.setWindowTitle("Engram")
        self.dialog.setWindowModality(Qt.WindowModality.WindowModal)
        self.dialog.setMinimumDuration(0)
        self.dialog.canceled.connect(self.stop.set)
        self.window.runner.submit("bulk", _write_store, self.window.services, path, parsed, self.stop,
                                  self.progressed.emit, on_done=self._done, on_error=self._failed)

    def _on_progress(self, done: int, total: int) -> None:
        if self.dialog is not None:
            self.dialog.setMaximum(max(total, 1))
            self.dialog.setValue(done)
            self.dialog.setLabelText(f"Importing: {done:,} of {total:,} turns")

    def _done(self, report: Any) -> None:
        self._close_dialog()
        words = [f"Imported {counted(report.turns, 'turn')} in {counted(report.conversations, 'conversation')}"]
        if report.memories:
            words.append(counted(report.memories, "memory"))
        text = ", ".join(words) + "."
        if report.already or report.memories_already:
            text += f" {report.already + report.memories_already:,} were already here."
        left_out = ", ".join(f"{n:,} {what}" for what, n in sorted(report.skipped.items()) if n)
        if left_out:
            text += f" Left out: {left_out}."
        if report.stopped:
            text += " Stopped: import the same file again to bring the rest."
        elif report.turns:
            text += " Engram learns from them while you are away; Jobs shows how far it is."
        self._done_with(text)

    def _done_with(self, text: str) -> None:
        self._refresh_views()
        self.tell("Import", text)
        self.finished.emit(text)

    def _failed(self, exc: BaseException) -> None:
        self._close_dialog()
        text = f"Nothing was imported: {exc}"
        self.tell("Import", text)
        self.finished.emit(text)

    def _close_dialog(self) -> None:
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None

    def _refresh_views(self) -> None:
        self.window.memories_changed.emit()
        chat = self.window.panels.get("chat")
        sessions = getattr(chat, "sessions", None)
        if sessions is not None:
            sessions.reload()

    def _message_box(self, title: str, text: str) -> None:
        QMessageBox.information(self.window, title, text)


def droppable(path: str) -> bool:
    return Path(path).suffix.lower() in DROPPABLE


def _read(path: str) -> tuple[str, Any]:
    from core.importers.archive import detect_source, read_export
    source = detect_source(path)
    return source, read_export(source, path)


def _write_store(services: Any, path: str | Path, parsed: Any, stop: threading.Event,
                 progress: Callable[[int, int], None]) -> Any:
    from core.importers.write import batch_id, digest_file, import_parsed
    from core.store.db import open_db
    db = open_db(services.db_path)
    try:
        return import_parsed(db, services.embedder, parsed, batch=batch_id(parsed.source, digest_file(path)),
                             progress=progress, stop=stop.is_set)
    finally:
        db.close()


def attach(window: QWidget) -> ImportHistory:
    """The window's importer, made once."""
    importer = getattr(window, "history_import", None)
    if importer is None:
        importer = ImportHistory(window)
        setattr(window, "history_import", importer)  # noqa: B010 - kept on the window, whose class does not declare it
    return importer
