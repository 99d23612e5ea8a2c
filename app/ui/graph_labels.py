"""The memory graph's labels: one item that paints the chosen nodes' short statements beside them.

Which nodes are named, and where, is core.memory.graph_view.choose_labels's decision, taken in screen pixels
whenever the view pans, zooms or changes; this item only keeps each label's node (in graph coordinates) and its
offset in pixels, so a label stays beside its node while the next decision is pending. One item painting a few
dozen static texts costs far less than a text item per node."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPalette, QStaticText

from app.ui.panel_widgets import palette
from core.memory.graph_view import GraphView, choose_labels, elide, label_budget

PAD = (4.0, 1.0)  # pixels of backing around a label's text, across and down
BACKING_ALPHA = 200  # the backing lets edges show through faintly but keeps the words readable over them


class LabelLayer(pg.GraphicsObject):
    def __init__(self) -> None:
        super().__init__()
        self.setZValue(10)  # above edges and nodes
        self.font = QFont()
        self.font.setPointSizeF(max(self.font.pointSizeF() * 0.9, 8.0))
        self.bold = QFont(self.font)
        self.bold.setBold(True)
        self.texts: list[str] = []  # every node's label text, for the current view
        self.sizes = np.zeros((0, 2))  # every node's label box in pixels, backing included
        self._labels: list[tuple[int, QPointF, QPointF, QRectF, QStaticText]] = []  # node, anchor, offset, box, text
        self._bold_index: int | None = None

    # -- what to say -----------------------------------------------------------------------------------------
    def set_view(self, view: GraphView) -> None:
        """Measure every node's short label once per new graph, not once per frame."""
        self.texts = [elide(node.label) for node in view.nodes]
        metrics = QFontMetricsF(self.font)
        widths = [metrics.horizontalAdvance(text) for text in self.texts]
        self.sizes = np.array([(w + 2 * PAD[0], metrics.height() + 2 * PAD[1]) for w in widths]).reshape(-1, 2)

    def place(self, view: GraphView, priority: np.ndarray, shown: np.ndarray, pinned: Sequence[int],
              whole: QRectF | None, radii: np.ndarray | float = 6.0) -> None:
        """Choose the labels for what is on screen now: `shown` masks the nodes drawn, `pinned` leads (the
        selection, then its neighbours); `whole` is the whole graph's extent, to tell how far the user zoomed;
        `radii` are the nodes' drawn radii in pixels, which labels keep off (their own, and others' where they
        can)."""
        box = self.getViewBox()
        if box is None or not view.nodes or len(self.texts) != len(view.nodes):
            self.clear()
            return
        rect, width, height = box.viewRect(), box.width(), box.height()
        if rect.width() <= 0 or rect.height() <= 0 or width <= 0 or height <= 0:
            self.clear()
            return
        screen = self._to_screen(view.positions, rect, width, height)
        screen[~shown] = np.nan  # hidden kinds are never labelled
        sizes = self.sizes.copy()
        bold = pinned[0] if pinned else None
        if bold is not None:
            sizes[bold, 0] = QFontMetricsF(self.bold).horizontalAdvance(self.texts[bold]) + 2 * PAD[0]
        placed = choose_labels(screen, priority, sizes, viewport=(width, height), pinned=pinned,
                               limit=label_budget(_zoom(whole, rect)), radius=radii)
        self._labels = [(p.index, QPointF(*view.positions[p.index]),
                         QPointF(p.box[0] - screen[p.index][0], p.box[1] - screen[p.index][1]),
                         QRectF(0, 0, p.box[2], p.box[3]), _static(self.texts[p.index])) for p in placed]
        self._bold_index = bold if any(p.index == bold for p in placed) else None
        self.update()

    def clear(self) -> None:
        self._labels, self._bold_index = [], None
        self.update()

    def shown(self) -> dict[int, str]:
        """The labelled nodes' indices and their labels."""
        return {label[0]: self.texts[label[0]] for label in self._labels}

    def bold_index(self) -> int | None:
        return self._bold_index

    @staticmethod
    def _to_screen(positions: np.ndarray, rect: QRectF, width: float, height: float) -> np.ndarray:
        """Graph coordinates to the view's pixels (y grows downwards on screen, upwards in the graph)."""
        x = (positions[:, 0] - rect.left()) / rect.width() * width
        y = (rect.top() + rect.height() - positions[:, 1]) / rect.height() * height
        return np.column_stack([x, y]).astype(float)

    # -- drawing -----------------------------------------------------------------------------------------------
    def boundingRect(self) -> QRectF:
        box = self.getViewBox()
        return QRectF(box.viewRect()) if box is not None else QRectF()  # labels may reach anywhere on screen

    def viewRangeChanged(self) -> None:
        self.prepareGeometryChange()  # the bounding rect follows the view

    def paint(self, painter: Any, *_: Any) -> None:
        if not self._labels:
            return
        transform = painter.transform()  # this item's coordinates to the painted pixels
        pal = palette()
        backing = QColor(pal.color(QPalette.ColorRole.Base))
        backing.setAlpha(BACKING_ALPHA)
        text_colour = pal.color(QPalette.ColorRole.Text)
        painter.save()
        painter.resetTransform()  # draw in pixels: labels keep their size whatever the zoom
        painter.setRenderHint(painter.RenderHint.Antialiasing)
        painter.setFont(self.font)
        for index, anchor, offset, box, text in self._labels:
            corner = transform.map(anchor) + offset
            if index == self._bold_index:
                painter.setFont(self.bold)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(backing)
            painter.drawRoundedRect(box.translated(corner), 3, 3)
            painter.setPen(text_colour)
            painter.drawStaticText(corner + QPointF(*PAD), text)
            if index == self._bold_index:
                painter.setFont(self.font)
        painter.restore()


def _static(text: str) -> QStaticText:
    static = QStaticText(text)
    static.setTextFormat(Qt.TextFormat.PlainText)  # a memory's words are data: "<b>" is shown, never rendered
    return static


def _zoom(whole: QRectF | None, rect: QRectF) -> float:
    """How many times closer than the whole-graph view the user looks (1.0 when it fits)."""
    if whole is None or whole.width() <= 0 or whole.height() <= 0:
        return 1.0
    return max(whole.width() / rect.width(), whole.height() / rect.height())  # the fitted side: 1.0 when it fits
