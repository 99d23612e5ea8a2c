"""Settings → "Other apps using your memory": the switch that serves it, who may read or change it, what each did
lately, and Revoke.

Granting stays a deliberate step in the terminal (`engram clients grant NAME`), which shows the token once; here the
user sees every grant and the access log ("Cursor read 3 memories at 14:02", core.clients.AccessLog), and can end
an app's access with one click. The box reads two small files, refreshed whenever the panel is shown. The switch
starts and stops the OpenAI-compatible server in the window (app.serve.in_app) on 127.0.0.1 only, and is saved as
the setting `serve_api` at once (like Appearance), so the next start serves again; it is off until the user turns it
on.
"""
from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import Qt

from PySide6.QtWidgets import QCheckBox, QGroupBox, QHBoxLayout, QLabel, QListWidget, QPushButton, QVBoxLayout

from core.clients import AccessLog, ClientRegistry
from core.config import update_settings
from core.errors import InvalidInput

LOG_LINES = 8


class ConnectedApps(QGroupBox):
    def __init__(self, data_dir: Any, server: Any = None, services: Any = None) -> None:
        """`server`: the window's app.serve.in_app.InAppServer, switched here; `services`: whose settings say
        whether it serves (both None: the grants and the log alone)."""
        super().__init__("Other apps using your memory")
        self.data_dir, self.server, self.services = data_dir, server, services
        self.registry = ClientRegistry(data_dir, time.time)
        self.log = AccessLog(data_dir, time.time)
        layout = QVBoxLayout(self)
        self.serve_switch = QCheckBox("Serve your memory to apps on this computer (OpenAI-compatible API)")
        self.serve_switch.setToolTip("Listens on 127.0.0.1 only: no other computer can reach it. Only apps you "
                                     "granted (`engram clients grant NAME`) get an answer.")
        self.serving = QLabel("")
        self.serving.setWordWrap(True)
        # the address, to paste into the other app
        self.serving.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        if server is not None:
            layout.addWidget(self.serve_switch)
            layout.addWidget(self.serving)
            self.serve_switch.setChecked(server.address is not None)
            self.serve_switch.toggled.connect(self.switch_serving)
            self._show_serving()
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

    def switch_serving(self, on: bool) -> None:
        """Start or stop the server, and save the choice; a port already taken is said, and the switch goes off."""
        if self.server is None:
            return
        problem = ""
        if on:
            try:
                self.server.start(self.services.settings.serve_port)
            except OSError as exc:
                problem = f"Could not serve on port {self.services.settings.serve_port}: {exc.strerror or exc}."
        else:
            self.server.stop()
        serving = self.server.address is not None
        try:
            self.services.settings = update_settings(self.data_dir, {"serve_api": serving})  # the one field, merged
        except OSError as exc:
            problem = problem or f"Could not save the switch: {exc}"
        if self.serve_switch.isChecked() != serving:
            self.serve_switch.blockSignals(True)
            self.serve_switch.setChecked(serving)
            self.serve_switch.blockSignals(False)
        self._show_serving(problem)

    def _show_serving(self, problem: str = "") -> None:
        address = self.server.address if self.server is not None else None
        if address is None:
            self.serving.setText(problem or "Off: no app can reach Engram.")
            return
        self.serving.setText(f"Serving on {address} (this computer only). In the other app, set the base URL to "
                             f"{address} and the API key to the token `engram clients grant NAME` printed for it.")

    def revoke_selected(self) -> None:
        row = self.clients.currentRow()
        granted = self.registry.clients()
        if 0 <= row < len(granted):
            self.registry.revoke(granted[row].name)
        self.refresh()
