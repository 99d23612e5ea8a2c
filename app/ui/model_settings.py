"""A model's own sampling, set in Models → "Model settings…": temperature, top-p, the longest reply and the context
length, each beside the model's own default (its generation_config.json), with "Use the model's defaults". Kept
per model (core.model_sampling); the next reply of that model uses them."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout, QLabel, QPushButton,
                               QSpinBox, QVBoxLayout, QWidget)

from core.model_sampling import (MAX_TEMPERATURE, MIN_CONTEXT, ModelSampling, model_defaults, model_sampling,
                                 model_window, save_model_sampling)

FIELDS = (  # name, label, what it does (the tooltip)
    ("temperature", "Temperature", "Higher is more varied, 0 always picks the likeliest word"),
    ("top_p", "Top-p", "Only the likeliest words that make up this share of the probability are sampled"),
    ("max_tokens", "Maximum reply length", "The longest reply, in tokens (at most half the context)"),
    ("context_tokens", "Context length", "How much of the conversation and memory the model reads at once, in "
                                         "tokens (never more than the model was trained for)"),
)


class ModelSettingsDialog(QDialog):
    def __init__(self, services: Any, repo_id: str, folder: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services, self.repo_id, self.folder = services, repo_id, folder
        self.setWindowTitle(f"Settings for {repo_id}")
        engram = services.settings.generation
        self.defaults = model_defaults(folder, engram)
        window = model_window(folder) or 1 << 20
        self.boxes: dict[str, Any] = {
            "temperature": _double(0.0, MAX_TEMPERATURE, 0.05), "top_p": _double(0.01, 1.0, 0.05),
            "max_tokens": _whole(1, window // 2), "context_tokens": _whole(min(MIN_CONTEXT, window), window)}
        form = QFormLayout()
        for name, label, tip in FIELDS:
            box = self.boxes[name]
            box.setToolTip(tip)
            box.setAccessibleName(label)
            form.addRow(label, box)
            hint = QLabel(f"The model's default: {_shown(getattr(self.defaults, name))}")
            hint.setObjectName(f"default_{name}")
            form.addRow("", hint)
        self.reset_button = QPushButton("Use the model's defaults")
        self.reset_button.clicked.connect(lambda: self.show_values(self.defaults))
        self.problem = QLabel("")
        self.problem.setWordWrap(True)
        self.problem.setVisible(False)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        intro = QLabel("How this model writes its replies. Each reply of this model uses them from the next one on.")
        intro.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.reset_button)
        layout.addWidget(self.problem)
        layout.addWidget(self.buttons)
        self.show_values(model_sampling(services.data_dir, repo_id, folder, engram))

    def show_values(self, sampling: ModelSampling) -> None:
        for name, value in asdict(sampling).items():
            self.boxes[name].setValue(value)

    def values(self) -> dict[str, Any]:
        return {name: (round(box.value(), 3) if isinstance(box, QDoubleSpinBox) else int(box.value()))
                for name, box in self.boxes.items()}

    def save(self) -> None:
        """Kept for this model; a value out of range says so in one line here and nothing is written."""
        try:
            save_model_sampling(self.services.data_dir, self.repo_id, self.folder, self.services.settings.generation,
                                self.values())
        except Exception as exc:  # noqa: BLE001 - InvalidInput, or the folder cannot be written: said, kept open
            self.problem.setText(str(exc))
            self.problem.setVisible(True)
            return
        self.accept()


def _double(low: float, high: float, step: float) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(low, high)
    box.setDecimals(2)
    box.setSingleStep(step)
    return box


def _whole(low: int, high: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(low, high)
    box.setSingleStep(256)
    box.setGroupSeparatorShown(True)
    return box


def _shown(value: float | int) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"
