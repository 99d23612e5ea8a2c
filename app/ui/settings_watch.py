"""Follows settings.json while the app is open: `engram models use` or a hand edit in another process changes it.

QFileSystemWatcher loses a file that is replaced by a rename (editors, and Engram's own atomic save), so the folder
is watched too and the file is added back after each change. Only a change of the file's text is reported.
"""
from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

from core.config import SETTINGS_FILENAME, Settings, ensure_private_dir

SETTLE_MS = 100  # a save is a write and a rename: read once they are both done


class SettingsWatcher(QObject):
    changed = Signal(object)  # the Settings the file now holds

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / SETTINGS_FILENAME
        self.last_text = self._read()
        self.watcher = QFileSystemWatcher(self)
        self.watcher.fileChanged.connect(self._soon)
        self.watcher.directoryChanged.connect(self._soon)
        self.settle = QTimer(self)
        self.settle.setSingleShot(True)
        self.settle.setInterval(SETTLE_MS)
        self.settle.timeout.connect(self.check)
        ensure_private_dir(self.data_dir)  # the window's store opens here anyway; watching needs the folder
        self._watch()

    def _watch(self) -> None:
        if str(self.data_dir) not in self.watcher.directories():
            self.watcher.addPath(str(self.data_dir))
        if self.path.is_file() and str(self.path) not in self.watcher.files():
            self.watcher.addPath(str(self.path))  # after a replace by rename the old file is no longer watched

    def _soon(self, _path: str = "") -> None:
        self.settle.start()

    def _read(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def check(self) -> Settings | None:
        """Read the file now; report (and return) its settings when its text changed since the last look."""
        self._watch()
        text = self._read()
        if text is None or text == self.last_text:
            return None  # gone, unreadable or the same: the app keeps what it has
        try:
            data = json.loads(text)
        except ValueError:
            return None  # half-edited by hand: wait for the next save rather than fall back to the defaults
        self.last_text = text
        settings = Settings.from_dict(data if isinstance(data, dict) else {})
        self.changed.emit(settings)
        return settings
