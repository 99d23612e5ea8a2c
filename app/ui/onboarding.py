"""The first-start screen: what Engram keeps, where (one file on this machine), how to see or wipe it, and the model
recommended for this machine with its size and fit. Shown once: dismissing it is remembered in settings.json.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.services.platform import this_machine
from app.ui.panel_widgets import PaletteFollower
from app.ui.theme import SPACING
from core.config import SETTINGS_FILENAME, update_settings

SEEN_KEY = "onboarding_seen"  # an app-level key: update_settings keeps keys the Settings dataclass does not know
FIT_WORDS = {"fits": "fits comfortably", "tight": "fits, but tightly", "too big": "is too big"}


def onboarding_seen(data_dir: Path) -> bool:
    """Whether the first-start screen was dismissed before (a missing or damaged file: not yet)."""
    try:
        data = json.loads((Path(data_dir) / SETTINGS_FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get(SEEN_KEY) is True


def mark_onboarding_seen(data_dir: Path) -> None:
    update_settings(Path(data_dir), {SEEN_KEY: True})  # the one key, merged into the file as it is now


def human_size(count: float) -> str:
    return f"{count / 1024 ** 3:.1f} GB" if count >= 1024 ** 3 else f"{count / 1024 ** 2:.0f} MB"


def keeps_text(db_path: Path, machine: str) -> str:
    return (f"<p><b>What Engram keeps.</b> Your conversations, the memories it learns from them (facts about you, "
            f"your preferences, what happened) and the guesses it is still checking.</p>"
            f"<p><b>Where.</b> In one file on {machine}:<br><code>{_escape(str(db_path))}</code><br>"
            f"The model runs on {machine} too: your conversations are not sent anywhere.</p>"
            f"<p><b>How to see or wipe it.</b> Memories lists everything Engram believes about you: open any memory "
            f"to see where it came from, edit it, or delete it (Delete key). To wipe everything, Memories has "
            f"<i>Forget everything</i>: it keeps a backup first, so it can be undone.</p>")


def model_text(info: Any, budget: Any, machine: str, palette: Any = None, speed: Any = None) -> str:
    """The recommended model in a sentence: its name, download size, and its fit (a pill) against what a model
    may use here (a models.budget.MemoryBudget)."""
    from app.ui.fit_pill import pill_html
    from models.budget import budget_words
    from models.registry import fit
    verdict = fit(info.ram_bytes, budget.bytes)
    fits = FIT_WORDS.get(verdict, "may fit")
    memory = f" ({budget_words(budget, machine)})" if budget.bytes > 0 else ""
    pace = speed.model_pace(info) if speed is not None else None
    writes = (f" Here it writes about {pace:.0f} {'token' if round(pace) == 1 else 'tokens'} a second."
              if pace is not None and pace >= 1 else
              f" Here it writes about {pace:.1f} tokens a second: slow on {machine}, the fastest that fits."
              if pace is not None else "")
    return (f"<p><b>A model to chat with.</b> Recommended for {machine}{memory}: <b>{_escape(info.name)}</b> "
            f"{pill_html(verdict, palette)} — a {human_size(info.size_bytes)} download that needs about "
            f"{human_size(info.ram_bytes)} of memory and {fits}.{writes} Or add a model folder or a GGUF file you "
            f"already have.</p>")


def recommendation(data_dir: Any = None, mlx_worker: Any = None) -> tuple[Any, Any, Any]:
    """The model recommended for this machine, the memory budget and the measured speed (models.speed, cached in
    the data folder) it was chosen by (reads the machine: off the GUI thread; the probe on MLX's one thread)."""
    from models.budget import memory_budget
    from models.registry import default_model
    from models.speed import machine_speed, probe_bandwidth
    budget = memory_budget()
    probe = (lambda: mlx_worker.call(probe_bandwidth)) if mlx_worker is not None else None
    speed = machine_speed(data_dir, probe=probe) if data_dir is not None else None
    return default_model(budget.bytes, speed=speed), budget, speed


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Onboarding(QDialog):
    """One screen, then the Models panel (or straight to the app with "Start")."""

    def __init__(self, db_path: Path, on_models: Callable[[], object], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Welcome to Engram")
        self.setMinimumWidth(620)
        self.machine = this_machine()
        self.on_models = on_models
        self.found: tuple[Any, ...] | None = None  # the recommendation, once read
        PaletteFollower(self, self._recolour)
        heading = QLabel("Welcome to Engram")
        heading.setProperty("role", "display")  # the type scale's largest size (app/ui/theme.py)
        self.keeps = QLabel(keeps_text(db_path, self.machine))
        self.model = QLabel(f"<p>Finding the model that suits {self.machine}…</p>")
        for label in (self.keeps, self.model):
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.RichText)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # the path can be copied
        self.models_button = QPushButton("Choose a model…")
        self.models_button.setDefault(True)
        self.models_button.clicked.connect(self._to_models)
        self.start_button = QPushButton("Start")
        self.start_button.clicked.connect(self.accept)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.models_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACING.xl, SPACING.xl, SPACING.xl, SPACING.l)
        layout.setSpacing(SPACING.m)
        for widget in (heading, self.keeps, self.model):
            layout.addWidget(widget)
        layout.addSpacing(SPACING.s)
        layout.addLayout(buttons)

    def show_recommendation(self, found: tuple[Any, ...]) -> None:
        self.found = found
        info, budget, *speed = found
        self.model.setText(model_text(info, budget, self.machine, self.palette(), speed[0] if speed else None))

    def _recolour(self) -> None:
        """Light and dark mode switched: the pill's colours are baked into the rich text, so it is drawn again."""
        if self.found is not None:
            self.show_recommendation(self.found)

    def _to_models(self) -> None:
        self.accept()
        self.on_models()
