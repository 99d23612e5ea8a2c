"""A model's fit verdict (fits / tight / too big) as a coloured pill: in the Models table and on the welcome screen.

Colours come from the theme's meanings (ok / warn / bad) for the palette being drawn, so a pill reads in light and
dark mode alike: the verdict's colour as text on a faint fill of the same colour over the view's background.
"""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionViewItem

from app.ui.theme import colors, contrast_ratio

MEANINGS = {"fits": "ok", "tight": "warn", "too big": "bad"}
FILL_SHARE = 0.16  # how much of the verdict's colour shows in the fill, lowered until its text reads on it
READABLE = 4.5  # WCAG AA for body text


def pill_colours(verdict: str, palette: QPalette | None = None) -> tuple[QColor, QColor]:
    """(text, fill) for a verdict; an unknown verdict gets the palette's own text on its background."""
    scheme = colors(palette)
    meaning = MEANINGS.get(verdict)
    if meaning is None:
        return QColor(scheme.text), QColor(scheme.background)
    text = QColor(getattr(scheme, meaning))
    share = FILL_SHARE
    fill = blend(text, scheme.background, share)
    while share > 0 and contrast_ratio(text, fill) < READABLE:
        share = round(share - 0.02, 2)
        fill = blend(text, scheme.background, share)
    return text, fill


def blend(colour: QColor, background: QColor, share: float) -> QColor:
    """`colour` at `share` over `background`, opaque (rich text and painters both draw it the same)."""
    channels = (colour.redF(), colour.greenF(), colour.blueF())
    under = (background.redF(), background.greenF(), background.blueF())
    mix = [share * a + (1 - share) * b for a, b in zip(channels, under)]
    return QColor.fromRgbF(*mix)


def pill_html(verdict: str, palette: QPalette | None = None) -> str:
    text, fill = pill_colours(verdict, palette)
    return (f'<span style="color:{text.name()}; background-color:{fill.name()}; font-weight:600;">'
            f'&nbsp;{verdict}&nbsp;</span>')


class FitPillDelegate(QStyledItemDelegate):
    """Draws a table cell's verdict text as a rounded pill; selection and focus are drawn as for any cell."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index) -> None:
        verdict = str(index.data() or "")
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        if not verdict:
            return
        text, fill = pill_colours(verdict, option.palette)
        metrics = option.fontMetrics
        width = metrics.horizontalAdvance(verdict) + metrics.height()
        height = metrics.height() + 4
        rect = QRectF(option.rect.left() + 4, option.rect.center().y() - height / 2 + 1, width, height)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(fill)
        painter.drawRoundedRect(rect, height / 2, height / 2)
        painter.setPen(text)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, verdict)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index):
        size = super().sizeHint(option, index)
        size.setWidth(size.width() + option.fontMetrics.height() + 8)
        return size
