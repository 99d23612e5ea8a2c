"""The sidebar's icons: one set of monochrome SVGs drawn for Engram (resources/icons/, no third-party licence), each
stroked in `currentColor`, tinted here to a palette colour so the same file reads in light and dark mode."""
from __future__ import annotations

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer

from app.services.resources import resource_path

ICON_FOLDER = "icons"
ICON_NAMES = ("chat", "memories", "graph", "hypotheses", "timeline", "jobs", "models", "settings")
RENDER_SIZES = (16, 18, 24)  # pixels, each also at twice the size for Retina screens


def svg_text(name: str) -> str:
    """The icon's SVG source; NotFound names the folder when the file is missing."""
    return resource_path(ICON_FOLDER, f"{name}.svg").read_text(encoding="utf-8")


def tinted_pixmap(svg: str, color: QColor, size: int, scale: float = 1.0) -> QPixmap:
    """`svg` drawn at `size`×`size` logical pixels in `color` (its currentColor)."""
    renderer = QSvgRenderer(QByteArray(svg.replace("currentColor", color.name()).encode("utf-8")))
    pixels = round(size * scale)
    pixmap = QPixmap(pixels, pixels)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, pixels, pixels))
    painter.end()
    pixmap.setDevicePixelRatio(scale)
    return pixmap


def themed_icon(name: str, palette: QPalette) -> QIcon:
    """The named icon in the palette's text colour; white-on-highlight when selected; greyed when disabled."""
    svg = svg_text(name)
    icon = QIcon()
    states = ((QIcon.Mode.Normal, palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.Text)),
              (QIcon.Mode.Active, palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.Text)),
              (QIcon.Mode.Selected, palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.HighlightedText)),
              (QIcon.Mode.Disabled, palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)))
    for mode, color in states:
        for size in RENDER_SIZES:
            for scale in (1.0, 2.0):
                icon.addPixmap(tinted_pixmap(svg, color, size, scale), mode, QIcon.State.Off)
    return icon


def icon_size(pixels: int = 18) -> QSize:
    return QSize(pixels, pixels)
