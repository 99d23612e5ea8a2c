"""Forgetting timeline: the projected retention of the memories and conversations closest to being forgotten
(the forgetting curves) against the threshold line; what is coming up; and what was forgotten, when and why,
with Restore. Click a curve (or a row) to pin or protect that item, which takes it out of forgetting.

Reads and writes run on the database lane; the curves come from core.memory.forget.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel, QPushButton,
                               QSplitter, QTableWidget, QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from app.ui.panel_widgets import (PaletteFollower, ReloadOnShow, accent, empty_state, palette, themed_plot,
                                  when)
from app.ui.timeline_state import EMPTY, Curve, PastEvent, TimelineView, days_text, empty_text, read_timeline
from core.memory import forget
from core.memory.manage import MemoryManager
from core.words import counted

HORIZONS = (("30 days", 30), ("90 days", 90), ("6 months", 180), ("1 year", 365))
UPCOMING_COLUMNS = ("What", "Kind", "Retention now", "Forgotten")
PAST_COLUMNS = ("What", "Kind", "Action", "When", "Why", "Score", "Restored")
KEY_ROLE = Qt.ItemDataRole.UserRole + 1


def _table(columns: Sequence[str], stretch: int = 0) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(columns)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.setAlternatingRowColors(True)
    table.horizontalHeader().setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return table


def _fill(table: QTableWidget, rows: Sequence[Sequence[str]], keys: Sequence[Any]) -> None:
    table.setRowCount(len(rows))
    for r, (values, key) in enumerate(zip(rows, keys)):
        for c, value in enumerate(values):
            item = QTableWidgetItem(value)
            item.setData(KEY_ROLE, key)
            item.setToolTip(values[0] if c == 0 else value)
            table.setItem(r, c, item)


class TimelinePanel(ReloadOnShow, QWidget):
    loaded = Signal()  # after each reload, for tests

    def __init__(self, context: Any) -> None:
        super().__init__()
        self.context = context
        self.services = context.services
        self.runner = context.runner
        self.view = TimelineView([], 0.0, [], [])
        self.selected: Optional[Curve] = None
        self.curve_items: dict[str, Any] = {}
        self._build()
        self.changed = getattr(context.window, "memories_changed", None)  # shared with the other memory views
        if self.changed is not None:
            self.changed.connect(self.reload)
        self.reload()

    # --- layout -----------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.summary = QLabel("Reading what Engram may forget…")
        self.summary.setWordWrap(True)
        self.horizon = QComboBox()
        for text, days in HORIZONS:
            self.horizon.addItem(text, days)
        self.horizon.setCurrentIndex(1)
        self.horizon.currentIndexChanged.connect(lambda _i: self.reload())
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(QLabel("Look ahead"))
        top.addWidget(self.horizon)
        self.plot = themed_plot()
        self.plot.setLabel("left", "retention")
        self.plot.setLabel("bottom", "days from now")
        self.plot.setYRange(0.0, 1.0)
        PaletteFollower(self.plot, lambda: self._draw(self.view))  # curve colours are picked for light or dark mode
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot_empty = empty_state(EMPTY)
        self.selection = QLabel("Click a curve or a row to pin or protect that item.")
        self.selection.setWordWrap(True)
        self.pin_button = QPushButton("Pin")
        self.protect_button = QPushButton("Protect")
        for button, handler in ((self.pin_button, self.on_pin), (self.protect_button, self.on_protect)):
            button.setEnabled(False)
            button.clicked.connect(handler)
        chosen = QHBoxLayout()
        chosen.addWidget(self.selection, 1)
        chosen.addWidget(self.pin_button)
        chosen.addWidget(self.protect_button)
        upper = QWidget()
        upper_layout = QVBoxLayout(upper)
        upper_layout.setContentsMargins(0, 0, 0, 0)
        upper_layout.addWidget(self.plot, 1)
        upper_layout.addWidget(self.plot_empty)
        upper_layout.addLayout(chosen)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(upper)
        split.addWidget(self._tabs())
        split.setSizes([420, 260])
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        self.message = QLabel("")
        layout.addWidget(self.message)

    def _tabs(self) -> QTabWidget:
        self.upcoming = _table(UPCOMING_COLUMNS)
        self.upcoming.itemSelectionChanged.connect(self._on_upcoming_row)
        self.past = _table(PAST_COLUMNS, stretch=4)
        self.past.itemSelectionChanged.connect(self._update_restore)
        self.restore_button = QPushButton("Restore")
        self.restore_button.setEnabled(False)
        self.restore_button.clicked.connect(self.on_restore)
        past_box = QWidget()
        past_layout = QVBoxLayout(past_box)
        past_layout.addWidget(self.past, 1)
        row = QHBoxLayout()
        row.addWidget(self.restore_button)
        row.addStretch(1)
        past_layout.addLayout(row)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.upcoming, "Coming up")
        self.tabs.addTab(past_box, "Forgotten")
        return self.tabs

    # --- reading ----------------------------------------------------------------------------------------
    def reload(self) -> None:
        horizon, settings = int(self.horizon.currentData()), self.services.settings
        self._run(lambda db: read_timeline(db, settings, horizon_days=horizon), self._show)

    def _show(self, view: TimelineView) -> None:
        keep = self.selected.key if self.selected else None
        self.view = view
        self._draw(view)
        upcoming = view.upcoming
        _fill(self.upcoming, [(c.label, c.item_type, f"{c.retention:.0%}", days_text(c.days_left)) for c in upcoming],
              [c.key for c in upcoming])
        _fill(self.past, [self._past_row(p) for p in view.past], [p.event.id for p in view.past])
        self.tabs.setTabText(0, f"Coming up ({len(upcoming)})")
        self.tabs.setTabText(1, f"Forgotten ({len(view.past)})")
        strength = self.services.settings.forgetting.strength
        self.summary.setText(f"Engram forgets what falls below retention {view.threshold:.2f} (strength: "
                             f"{strength}). {counted(view.due_now, 'item')} would go if forgetting ran now; "
                             f"{len(upcoming)} of those drawn {'fades' if len(upcoming) == 1 else 'fade'} within "
                             f"the look-ahead; {counted(sum(p.restorable for p in view.past), 'forgotten item')} "
                             f"can be restored.")
        self.select_item(keep) if keep else self._set_selected(None)
        self._update_restore()
        self.loaded.emit()

    @staticmethod
    def _past_row(past: PastEvent) -> tuple[str, ...]:
        e = past.event
        action = {"archive": "archived", "compact": "compacted into a summary"}.get(e.action, e.action)
        return (past.label, e.item_type, action, when(e.at), e.reason, f"{e.retention:.3f}",
                when(e.restored_at) if e.restored_at else "")

    def _draw(self, view: TimelineView) -> None:
        import pyqtgraph as pg  # deferred with the plot
        self.plot.clear()
        self.curve_items = {}
        has_curves = bool(view.curves)
        self.plot_empty.setText(empty_text(view, self.services.settings.forgetting.min_age_days))
        self.plot_empty.setVisible(not has_curves)
        self.plot.setVisible(has_curves)
        if not has_curves:
            return
        warn = QColor.fromHsl(0, 180, 150)
        dashed = pg.mkPen(warn, width=2, style=Qt.PenStyle.DashLine)
        self.plot.addItem(pg.InfiniteLine(pos=view.threshold, angle=0, pen=dashed,
                                          label="forgotten below {value:.2f}",
                                          labelOpts={"position": 0.9, "color": warn}))
        for n, curve in enumerate(view.curves):
            item = self.plot.plot(view.days, curve.values, pen=self._pen(n, curve))
            item.setCurveClickable(True, width=8)
            item.sigClicked.connect(lambda _item, _event, key=curve.key: self.select_item(key))
            item.setToolTip(curve.label)
            self.curve_items[curve.key] = item
        self.plot.setXRange(view.days[0], view.days[-1], padding=0.02)

    def _pen(self, n: int, curve: Curve) -> Any:
        import pyqtgraph as pg
        chosen = self.selected is not None and self.selected.key == curve.key
        colour = palette().color(QPalette.ColorRole.Highlight) if chosen else accent(n)
        if not chosen:
            colour.setAlpha(170)
        return pg.mkPen(colour, width=3.5 if chosen else 1.4)

    # --- selection --------------------------------------------------------------------------------------
    def select_item(self, key: str) -> bool:
        """Select an item by 'memory:12' / 'episode:4', as a click on its curve does."""
        curve = next((c for c in self.view.curves if c.key == key), None)
        self._set_selected(curve)
        return curve is not None

    def _set_selected(self, curve: Optional[Curve]) -> None:
        self.selected = curve
        for n, item in enumerate(self.view.curves):
            if item.key in self.curve_items:
                self.curve_items[item.key].setPen(self._pen(n, item))
        self.pin_button.setEnabled(curve is not None and curve.item_type == "memory")
        self.protect_button.setEnabled(curve is not None)
        if curve is None:
            self.selection.setText("Click a curve or a row to pin or protect that item.")
            return
        self.selection.setText(f"{curve.item_type} #{curve.item_id}: {curve.label} — retention "
                               f"{curve.retention:.0%}, forgotten {days_text(curve.days_left)}")

    def _on_upcoming_row(self) -> None:
        items = self.upcoming.selectedItems()
        if items:
            self.select_item(items[0].data(KEY_ROLE))

    def _selected_event(self) -> Optional[PastEvent]:
        items = self.past.selectedItems()
        event_id = items[0].data(KEY_ROLE) if items else None
        return next((p for p in self.view.past if p.event.id == event_id), None)

    def _update_restore(self) -> None:
        past = self._selected_event()
        self.restore_button.setEnabled(past is not None and past.restorable)

    def select_event(self, event_id: int) -> bool:
        for row in range(self.past.rowCount()):
            item = self.past.item(row, 0)
            if item is not None and item.data(KEY_ROLE) == event_id:
                self.past.selectRow(row)
                return True
        return False

    # --- actions ----------------------------------------------------------------------------------------
    def on_pin(self) -> None:
        curve = self.selected
        if curve is not None and curve.item_type == "memory":
            self._write(lambda db: MemoryManager(db).pin(curve.item_id, "pinned from the forgetting timeline"),
                        f"Pinned: {curve.label}. It will not be forgotten.")

    def on_protect(self) -> None:
        curve = self.selected
        if curve is None:
            return
        item_id = curve.item_id
        if curve.item_type == "memory":
            def work(db: Any) -> Any:
                return MemoryManager(db).protect(item_id, "protected from the forgetting timeline")
        else:
            def work(db: Any) -> Any:
                return MemoryManager(db).protect_episode(item_id)
        self._write(work, f"Protected: {curve.label}. It will not be forgotten.")

    def on_restore(self) -> None:
        past = self._selected_event()
        if past is not None and past.restorable:
            self._write(lambda db: forget.undo(db, past.event.id), f"Restored: {past.label}")

    def _write(self, work: Callable[[Any], Any], done_text: str) -> None:
        def finished(_result: Any) -> None:
            self.message.setText(done_text)
            if self.changed is not None:
                self.changed.emit()  # the Memories and graph panels redraw too, and so does this one
            else:
                self.reload()
        self._run(work, finished)

    def _run(self, work: Callable[[Any], Any], then: Callable[[Any], None]) -> None:
        """work(db) on the database lane, then(result) back here."""
        self.runner.submit("db", lambda: work(self.services.db), on_done=then, on_error=self._failed)

    def _failed(self, exc: BaseException) -> None:
        self.message.setText(f"Could not do that: {exc}")
