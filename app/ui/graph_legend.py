"""The memory graph's colours by kind and its legend: one button per kind (swatch, name, count) that shows or hides
that kind's nodes.

The colours are Okabe and Ito's palette, chosen to stay apart for people with red-green colour blindness; each kind
keeps its hue in both modes, a darker or lighter member of the palette where one reads better on the background.
"""
from __future__ import annotations

from typing import Mapping

from PySide6.QtCore import QPointF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap, QPolygonF
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from app.ui.panel_widgets import PaletteFollower, is_dark

KINDS = ("semantic", "episodic", "summary", "entity")  # legend order
KIND_NAMES = {"semantic": "Facts", "episodic": "Events", "summary": "Summaries", "entity": "People & things"}
KIND_HELP = {"semantic": "What Engram believes about you and your world",
             "episodic": "Things that happened, remembered as events",
             "summary": "Summaries of several memories",
             "entity": "People, places and things your memories mention"}
# (on a light background, on a dark one): blue, vermillion/orange, reddish purple, bluish green
KIND_COLOURS = {"semantic": ("#0072B2", "#56B4E9"), "episodic": ("#D55E00", "#E69F00"),
                "summary": ("#CC79A7", "#CC79A7"), "entity": ("#009E73", "#009E73")}
OTHER_COLOUR = ("#7F7F7F", "#9A9A9A")  # a kind this build does not know yet
SWATCH = 12  # pixels


def kind_colour(kind: str) -> QColor:
    light, dark = KIND_COLOURS.get(kind, OTHER_COLOUR)
    return QColor(dark if is_dark() else light)


def kind_name(kind: str) -> str:
    return KIND_NAMES.get(kind, kind.capitalize())


def swatch(colour: QColor, *, diamond: bool, hollow: bool) -> QIcon:
    """The node's shape in its colour (hollow when the kind is hidden), as the legend shows it."""
    pixmap = QPixmap(SWATCH, SWATCH)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(colour)
    painter.setBrush(Qt.BrushStyle.NoBrush if hollow else colour)
    if diamond:
        half, centre = SWATCH / 2 - 1, SWATCH / 2
        painter.drawPolygon(QPolygonF([QPointF(centre, centre - half), QPointF(centre + half, centre),
                                       QPointF(centre, centre + half), QPointF(centre - half, centre)]))
    else:
        painter.drawEllipse(1, 1, SWATCH - 2, SWATCH - 2)
    painter.end()
    return QIcon(pixmap)


class KindLegend(QWidget):
    """Kind → swatch, name and count; clicking a kind shows or hides its nodes (`changed` tells the panel)."""
    changed = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.buttons: dict[str, QToolButton] = {}
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.row.setSpacing(2)
        self.title = QLabel("Show:")
        self.row.addWidget(self.title)
        self.row.addStretch(1)
        PaletteFollower(self, self._restyle)

    def colour(self, kind: str) -> QColor:
        return kind_colour(kind)

    def hidden(self) -> set[str]:
        return {kind for kind, button in self.buttons.items() if not button.isChecked()}

    def set_counts(self, counts: Mapping[str, int]) -> None:
        """One button per kind the graph holds, in legend order; a kind that left the graph loses its button."""
        present = [k for k in KINDS if counts.get(k)] + sorted(k for k in counts if k not in KINDS and counts[k])
        for kind in list(self.buttons):
            if kind not in present:
                self.buttons.pop(kind).deleteLater()
        for position, kind in enumerate(present):
            button = self.buttons.get(kind) or self._button(kind)
            self.row.insertWidget(1 + position, button)
            button.setText(f"{kind_name(kind).replace('&', '&&')} {counts[kind]:,}")  # '&' alone: a shortcut
        self.title.setVisible(bool(present))

    def _button(self, kind: str) -> QToolButton:
        button = QToolButton()
        button.setCheckable(True)
        button.setChecked(True)
        button.setAutoRaise(True)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        button.setIconSize(QSize(SWATCH, SWATCH))
        button.setToolTip(f"{KIND_HELP.get(kind, kind)}. Click to show or hide them.")
        button.toggled.connect(lambda _on, k=kind: self._toggled(k))
        self.buttons[kind] = button
        self._paint_swatch(kind)
        return button

    def _toggled(self, kind: str) -> None:
        self._paint_swatch(kind)
        self.changed.emit()

    def _paint_swatch(self, kind: str) -> None:
        button = self.buttons[kind]
        button.setIcon(swatch(kind_colour(kind), diamond=kind == "entity", hollow=not button.isChecked()))

    def _restyle(self) -> None:
        for kind in self.buttons:
            self._paint_swatch(kind)
