"""Settings → "Other apps using your memory": who may read or change it, what each did lately, and Revoke.

Granting stays a deliberate step in the terminal (`engram clients grant NAME`), which shows the token once; here the
user sees every grant and the access log ("Cursor read 3 memories at 14:02", core.clients.AccessLog), and can end
an app's access with one click. The box reads two small files, refreshed whenever the panel is shown.
"""
from __future__ import annotations

import time
from typing import Any

from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QListWidget, QPushButton, QVBoxLayout

from core.clients import AccessLog, ClientRegistry
from core.errors import InvalidInput

LOG_LINES = 8


class ConnectedApps(QGroupBox):
    def __init__(self, data_dir: Any) -> None:
        super().__init__("Other apps using your memory")
        self.registry = ClientRegistry(data_dir, time.time)
        self.log = AccessLog(data_dir, time.time)
        layout = QVBoxLayout(self)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.clients = QListWidget()
        self.clients.setMaximumHeight(90)
        self.revoke_button = QPushButton("Revoke")
        self.revoke_button.clicked.connect(self.revoke_selected)
        self.clients.currentRowChanged.connect(lambda row: self.revoke_button.setEnabled(row >= 0))
        self.recent = QLabel("")
        self.recent.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.clients, 1)
        row.addWidget(self.revoke_button)
        layout.addWidget(self.summary)
        layout.addLayout(row)
        layout.addWidget(self.recent)
        self.refresh()

    def refresh(self) -> None:
        try:
            granted = self.registry.clients()
        except InvalidInput as exc:
            granted, problem = [], str(exc)
        else:
            problem = ""
        self.clients.clear()
        for client in granted:
            self.clients.addItem(f"{client.name} — {'reads and changes' if client.can_write else 'reads'}")
        self.revoke_button.setEnabled(False)
        self.summary.setText(problem or ("No other app may use your memory. To allow one, run "
                                         "`engram clients grant NAME` in Terminal (add --write to let it change "
                                         "memories); then `engram serve` or `engram mcp`." if not granted else
                                         "These apps may use your memory, on this Mac only:"))
        lines = [entry.describe() for entry in self.log.recent(LOG_LINES)]
        self.recent.setText("Lately: " + "; ".join(lines) + "." if lines else "No app has used your memory yet.")

    def revoke_selected(self) -> None:
        row = self.clients.currentRow()
        granted = self.registry.clients()
        if 0 <= row < len(granted):
            self.registry.revoke(granted[row].name)
        self.refresh()
