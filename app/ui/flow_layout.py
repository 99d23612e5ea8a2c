"""A layout that wraps its widgets onto new lines (a reply's chip rows), and the one way a widget leaves the screen."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QWidget


class FlowLayout(QLayout):
    """Lays its items left to right and wraps them onto new lines (Qt's flow-layout example, trimmed)."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 6) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:
        return self.minimumSize()

    def minimumSize(self) -> QSize:
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size

    def _arrange(self, rect: QRect, *, move: bool) -> int:
        x, y, line_height = rect.x(), rect.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            if x + hint.width() > rect.right() and line_height > 0:
                x, y, line_height = rect.x(), y + line_height + self._spacing, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self._spacing
            line_height = max(line_height, hint.height())
        return y + line_height - rect.y()


def discard(widget: QWidget) -> None:
    """Gone for the user at once: hidden now, deleted when Qt next gets to it (until then it would still paint)."""
    widget.hide()
    widget.deleteLater()


def layout_widgets(layout: QLayout) -> list[QWidget]:
    """The widgets in `layout`, in order (its spacers and nested layouts left out)."""
    items = (layout.itemAt(i) for i in range(layout.count()))
    return [w for w in (item.widget() for item in items if item is not None) if w is not None]


def empty_layout(layout: QLayout) -> None:
    """Every item taken out of `layout`, its widgets discarded."""
    while layout.count():
        item = layout.takeAt(0)
        if item is None:  # Qt returns none only past the end, which count() rules out
            break
        widget = item.widget()
        if widget is not None:
            discard(widget)
