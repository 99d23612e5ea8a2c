"""Small widgets the panels share: a confidence bar, empty states, plots that follow light and dark mode."""
from __future__ import annotations

import time
from typing import Any, Callable

from PySide6.QtCore import QEvent, QObject, QRect, Qt
from PySide6.QtGui import QColor, QPainter, QPalette, QResizeEvent
from PySide6.QtWidgets import (QApplication, QLabel, QStyle, QStyledItemDelegate, QStyleOptionViewItem,
                               QWidget)

BAR_ROLE = Qt.ItemDataRole.UserRole + 10  # a float in [0, 1] drawn as a bar by FractionBarDelegate


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def duration(seconds: float | None) -> str:
    """'1 h 05 min', '3 min 20 s', '12 s' — for ETAs."""
    if seconds is None or seconds < 0:
        return ""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


def palette() -> QPalette:
    return QApplication.palette() if QApplication.instance() is not None else QPalette()


def is_dark() -> bool:
    return palette().color(QPalette.ColorRole.Window).lightness() < 128


class FractionBarDelegate(QStyledItemDelegate):
    """Paints the BAR_ROLE value as a bar in the palette's highlight colour, with the number beside it."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Any) -> None:
        value = index.data(BAR_ROLE)
        if value is None:
            super().paint(painter, option, index)
            return
        background = QStyleOptionViewItem(option)
        self.initStyleOption(background, index)
        background.text = ""  # the row's background and selection only; the bar and number come next
        style = background.widget.style() if background.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, background, painter, background.widget)
        pal = option.palette
        text = index.data(Qt.ItemDataRole.DisplayRole) or f"{float(value):.0%}"
        area: QRect = option.rect.adjusted(4, 0, -4, 0)
        text_width = option.fontMetrics.horizontalAdvance("100%") + 6
        bar = QRect(area.left(), area.center().y() - 4, max(10, area.width() - text_width), 8)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        track = QColor(pal.color(QPalette.ColorRole.Mid))
        track.setAlpha(70)
        painter.setBrush(track)
        painter.drawRoundedRect(bar, 4, 4)
        fill = QRect(bar)
        fill.setWidth(int(bar.width() * max(0.0, min(1.0, float(value)))))
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        # on a selected row the highlight is the background: the bar takes the selected text's colour
        painter.setBrush(pal.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Highlight))
        painter.drawRoundedRect(fill, 4, 4)
        painter.setPen(pal.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text))
        painter.drawText(QRect(bar.right() + 4, area.top(), text_width, area.height()),
                         Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, text)
        painter.restore()


class ReloadOnShow:
    """Mixin for a panel that reads the store: shown again, it reloads, since idle-time jobs (reflection,
    consolidation, forgetting) change the store on their own connection without telling the panels."""
    _shown_before = False

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)  # type: ignore[misc]
        if self._shown_before:
            self.reload()  # type: ignore[attr-defined]
        self._shown_before = True


def heading(text: str, role: str = "subtitle") -> QLabel:
    """A section's heading at one of the type scale's sizes (app/ui/theme.py styles QLabel[role=...])."""
    label = QLabel(text)
    label.setProperty("role", role)
    return label


def empty_state(text: str) -> QLabel:
    """The centred grey hint a panel shows when it has nothing to show yet."""
    label = QLabel(text)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return label


def themed_plot(*, grid: bool = True, **kwargs: Any) -> Any:
    """A pyqtgraph PlotWidget drawn in the window's palette, following light and dark mode as they switch."""
    import pyqtgraph as pg  # deferred: the window opens before pyqtgraph is imported
    plot = pg.PlotWidget(**kwargs)
    apply_plot_theme(plot)
    if grid:
        plot.showGrid(x=True, y=True, alpha=0.15)
    PaletteFollower(plot, lambda: apply_plot_theme(plot))
    return plot


def apply_plot_theme(plot: Any) -> None:
    """The plot's background in the palette's Base colour and its axes in its Text colour."""
    import pyqtgraph as pg
    if getattr(plot, "plotItem", None) is None:  # a closed PlotWidget (pyqtgraph drops its item): nothing to theme
        return
    pal = palette()
    plot.setBackground(pal.color(QPalette.ColorRole.Base))
    text = pal.color(QPalette.ColorRole.Text)
    for axis in ("left", "bottom"):
        plot.getAxis(axis).setPen(pg.mkPen(text))
        plot.getAxis(axis).setTextPen(pg.mkPen(text))


class PaletteFollower(QObject):
    """Calls `on_change` when the application's palette switches (macOS light/dark mode), once per new palette.

    Parented to the watched widget, so it lives and dies with it.
    """

    def __init__(self, widget: QWidget, on_change: Callable[[], None]) -> None:
        super().__init__(widget)
        self.on_change = on_change
        self.base = palette().color(QPalette.ColorRole.Base).rgba()
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            base = palette().color(QPalette.ColorRole.Base).rgba()
            if base != self.base:  # a restyle can itself send palette events: act once per real change
                self.base = base
                self.on_change()
        return False


def accent(index: int) -> QColor:
    """A distinct curve colour that reads on both light and dark backgrounds."""
    hues = (212, 140, 28, 340, 268, 180, 52, 0, 300, 100)
    return QColor.fromHsl(hues[index % len(hues)], 170, 165 if is_dark() else 120)


class ElidedLabel(QLabel):
    """One line that ends in "…" when it is wider than its room (never cut mid-letter); text() and the tooltip keep
    the whole of it."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        self._full = str(text)
        self._elide()

    def text(self) -> str:
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.ensurePolished()  # a style sheet's font, not the default one, measures the text
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(self.width(), 1))
        super().setText(shown)
        self.setToolTip(self._full if shown != self._full else "")

    def shown_text(self) -> str:
        return super().text()
