"""Memory graph: node size = importance, edge width = Hebbian weight, colour = kind (with a legend), labels on the
nodes that matter and on more of them as the user zooms in, the whole statement on hover.

Read on the db lane, laid out on the panel's own thread (never the GUI thread), redrawn as turns add memories and
when another connection changed the store (the window's StoreWatch: `engram memory add` in a terminal, an idle-time
job); hidden, it is redrawn when next shown."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QToolButton, QVBoxLayout,
                               QWidget)

from app.ui.graph_labels import LabelLayer
from app.ui.graph_legend import KindLegend, kind_colour, kind_name
from app.ui.panel_widgets import PaletteFollower, palette, themed_plot
from core.memory.graph_view import GraphView, layout, load_graph, node_weights
from core.words import counted

OUTLINE_PX = 2.0  # half the selected node's outline, and a hair: how far past its size a node is drawn
EDGE_WIDTHS = (0.75, 1.5, 2.5, 4.0)  # pixels, by Hebbian weight quarter: one path per width, not one per edge
HINT = "Click a node to inspect it, then show its neighbourhood."
EMPTY = "No memories yet: the graph grows as you chat."
SPACIOUS, SMALLEST_SCALE = 150, 0.35  # node sizes: see node_sizes


def node_sizes(view: GraphView) -> np.ndarray:
    """Pixel sizes from importance (memories) or number of links (entities): 8–30 px in a graph of up to SPACIOUS
    nodes; past it smaller by the square root of the crowding, so the nodes cover about as much of the picture at
    700 as at 150 (at 8–30 px, 700 memories were one solid mass), never under a third of that."""
    scale = min(1.0, max(SMALLEST_SCALE, (SPACIOUS / max(len(view.nodes), 1)) ** 0.5))
    return np.round(scale * (8.0 + 22.0 * node_weights(view)))  # whole pixels: few distinct symbols to render


def edge_buckets(view: GraphView) -> np.ndarray:
    """For each edge, the index into EDGE_WIDTHS its Hebbian weight falls in (stronger: wider)."""
    weights = np.array([min(max(e.weight, 0.0), 1.0) for e in view.edges], dtype=float)
    return np.minimum((weights * len(EDGE_WIDTHS)).astype(int), len(EDGE_WIDTHS) - 1)


def same_graph(loaded: GraphView, shown: GraphView) -> bool:
    """Whether a fresh read has the nodes and edges already drawn (positions aside)."""
    return loaded.nodes == shown.nodes and loaded.edges == shown.edges


class GraphPanel(QWidget):
    drawn = Signal(int)  # number of nodes drawn, after each refresh
    node_clicked = Signal(object)  # the GraphNode

    def __init__(self, context: Any) -> None:
        super().__init__()
        self.context = context
        self.services = context.services
        self.runner = context.runner
        self.view = GraphView()
        self.positions: dict[str, tuple[float, float]] = {}
        self.center: int | None = None
        self.selected = None  # the GraphNode last clicked or asked for: it and its neighbours are highlighted
        self._wanted: int | None = None  # a memory to select once a drawing holds it
        self._find_match = False  # a search was typed: select and centre its best match once drawn
        self._busy = False
        self._stale = False  # the store changed while the panel was hidden: redraw when it is shown
        self._weights = np.zeros(0)  # node_weights of the view drawn: sizes, and who gets a label first
        self._whole: QRectF | None = None  # the whole graph's extent: how far the user zoomed in
        self._layouts = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-graph-layout")
        self._build()
        store = getattr(context.window, "store_watch", None)
        if store is not None:  # no timer of its own: the window's one look at data_version says when to re-read
            store.moved.connect(self.refresh)
        self.refresh()

    def _build(self) -> None:
        self.search = QLineEdit()
        self.search.setPlaceholderText("Show memories matching…")
        self.search.returnPressed.connect(self._on_search)
        self.hops = QSpinBox()
        self.hops.setRange(1, 4)
        self.hops.setPrefix("hops ")
        self.around_button = QPushButton("Neighbourhood")
        self.around_button.setEnabled(False)
        self.around_button.clicked.connect(lambda: self.selected and self.focus_on(self.selected.memory_id))
        self.open_button = QPushButton("Open memory")
        self.open_button.setToolTip("Its history, sources and controls in Memories")
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(lambda: self.selected and self.context.window.open_memory(
            self.selected.memory_id))
        self.clear_button = QPushButton("Whole graph")
        self.clear_button.clicked.connect(self.show_all)
        top = QHBoxLayout()
        for widget in (self.search, self.hops, self.around_button, self.open_button, self.clear_button):
            top.addWidget(widget)
        self.plot = themed_plot(grid=False)
        self.plot.hideAxis("left")
        self.plot.hideAxis("bottom")
        self.plot.setAspectLocked(True)
        # edges as one line path per width (a pen per edge draws 1,000s of paths on every pan), under the nodes
        self.edge_items = [pg.PlotCurveItem(connect="pairs") for _ in EDGE_WIDTHS]
        for item in self.edge_items:
            self.plot.addItem(item)
        self.graph = pg.GraphItem()
        self.plot.addItem(self.graph)
        self.graph.scatter.sigClicked.connect(self._on_click)
        self.labels = LabelLayer()
        self.plot.getViewBox().addItem(self.labels, ignoreBounds=True)  # labels never widen the autorange
        # placed once per pass of the event loop, however many range changes a pan or zoom step sends
        self._label_timer = QTimer(self)
        self._label_timer.setSingleShot(True)
        self._label_timer.setInterval(0)
        self._label_timer.timeout.connect(self._place_labels)
        self.plot.getViewBox().sigRangeChanged.connect(self._label_timer.start)
        self.plot.getViewBox().sigResized.connect(self._label_timer.start)
        PaletteFollower(self.plot, self._paint)  # edges, outlines and kind colours take the new mode's colours
        self.legend = KindLegend()
        self.legend.changed.connect(self._paint)
        self.labels_button = QToolButton()
        self.labels_button.setText("Labels")
        self.labels_button.setCheckable(True)
        self.labels_button.setChecked(True)
        self.labels_button.setAutoRaise(True)
        self.labels_button.setToolTip("Name the important nodes, and more of them as you zoom in")
        self.labels_button.toggled.connect(self._label_timer.start)
        keys = QHBoxLayout()
        keys.addWidget(self.legend, 1)
        keys.addWidget(self.labels_button)
        self.info = QLabel(HINT)
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.PlainText)  # a memory's words are data, never markup
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout_ = QVBoxLayout(self)
        layout_.addLayout(top)
        layout_.addWidget(self.plot, 1)
        layout_.addLayout(keys)
        layout_.addWidget(self.info)

    def refresh(self) -> None:
        if not self.isVisible() and self.view.nodes:
            self._stale = True  # a hidden panel is not redrawn once it has a picture, until it is shown
            return
        if self._busy:
            self._stale = True  # one layout at a time: the next one starts when this one is drawn
            return
        self._busy, self._stale = True, False
        search, center, hops, previous = self.search.text(), self.center, self.hops.value(), dict(self.positions)
        shown = self.view

        def read() -> GraphView | None:
            loaded = load_graph(self.services.db, search=search, around=center, hops=hops)
            return None if same_graph(loaded, shown) else loaded  # reading takes ms; laying out takes seconds
        self.runner.submit("db", read, on_done=lambda loaded: self._lay_out(loaded, previous),
                           on_error=self._failed)

    def _lay_out(self, loaded: GraphView | None, previous: dict[str, tuple[float, float]]) -> None:
        """Lay out on the panel's own thread: 2,000 nodes take seconds, which the db lane (the chat's recall runs
        there) must not wait for."""
        if loaded is None:
            self._draw(None)
            return
        try:
            future = self._layouts.submit(layout, loaded, previous)
        except RuntimeError:  # the panel was shut down while the store was read
            self._busy = False
            return
        future.add_done_callback(lambda done: self._deliver(self._laid_out, done))

    def _deliver(self, callback: Any, *args: Any) -> None:
        try:
            self.runner.post(callback, *args)
        except RuntimeError:  # the window closed while the layout ran: nobody to show it to
            pass

    def _laid_out(self, future: Future) -> None:
        if future.cancelled():
            self._busy = False
        elif (error := future.exception()) is not None:
            self._failed(error)
        else:
            self._draw(future.result())

    def focus_on(self, memory_id: int) -> None:
        self.center = memory_id
        self.refresh()

    def show_all(self) -> None:
        self.center = None
        self.search.clear()
        self.plot.getViewBox().enableAutoRange()  # the whole graph in view again, not the last centred node
        self.refresh()

    def _on_search(self) -> None:
        self._find_match = bool(self.search.text().strip())
        self.refresh()

    def select_memory(self, memory_id: int) -> bool:
        """Select a memory's node, centre the view on it and highlight it with its neighbours. A memory not in the
        picture yet (just learned or edited) is selected when the next drawing holds it; False until then."""
        index = self.view.index_of(f"m{memory_id}")
        if index is None:
            self._wanted = memory_id
            self.refresh()
            return False
        self._wanted = None
        self.select_node(self.view.nodes[index])
        self._centre(index)
        return True

    def _centre(self, index: int) -> None:
        x, y = (float(v) for v in self.view.positions[index])
        box = self.plot.getViewBox()
        (x0, x1), (y0, y1) = box.viewRange()
        half_w, half_h = (x1 - x0) / 2, (y1 - y0) / 2
        box.setRange(xRange=(x - half_w, x + half_w), yRange=(y - half_h, y + half_h), padding=0)

    def highlighted(self) -> tuple[int | None, set[int]]:
        """The selected node's index in the picture and its neighbours' indices."""
        index = self.view.index_of(self.selected.key) if self.selected is not None else None
        if index is None:
            return None, set()
        return index, {e.b if e.a == index else e.a for e in self.view.edges if index in (e.a, e.b)}

    def _select_when_drawn(self) -> None:
        """After a drawing: the memory asked for, or the best match of a typed search (the first memory node)."""
        wanted, self._wanted = self._wanted, None
        if self._find_match:
            self._find_match = False
            wanted = next((n.memory_id for n in self.view.nodes if n.memory_id is not None), wanted)
        if wanted is not None and self.view.index_of(f"m{wanted}") is not None:
            self.select_memory(wanted)

    def focus_search(self) -> None:
        self.search.setFocus()

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if self._stale:
            self.refresh()

    def _draw(self, view: GraphView | None) -> None:
        """Show a new layout; None means the store still holds what the picture shows."""
        self._busy = False
        if view is not None:
            self.view = view
            self.positions = {n.key: (float(x), float(y)) for n, (x, y) in zip(view.nodes, view.positions)}
            self._weights = node_weights(view)
            self._whole = _extent(view.positions)
            self.labels.set_view(view)
        if view is not None or not self.view.nodes:  # an empty store still needs its empty-state text
            self._paint()
        if self._stale:
            self.drawn.emit(len(self.view.nodes))
            self.refresh()  # the store changed during that layout; a wanted node may be in the next one
            return
        self._select_when_drawn()
        self.drawn.emit(len(self.view.nodes))

    def _shown(self) -> np.ndarray:
        """Which nodes are drawn: those of the kinds the legend shows."""
        hidden = self.legend.hidden()
        return np.array([n.kind not in hidden for n in self.view.nodes], dtype=bool)

    def _paint(self) -> None:
        view = self.view
        text, base = palette().color(QPalette.ColorRole.Text), palette().color(QPalette.ColorRole.Base)
        counts: dict[str, int] = {}
        for node in view.nodes:
            counts[node.kind] = counts.get(node.kind, 0) + 1
        self.legend.set_counts(counts)
        shown = self._shown()
        self._paint_edges(QColor(text.red(), text.green(), text.blue(), 110), shown)
        self._label_timer.start()
        if not view.nodes:
            self.graph.setData(pos=np.zeros((0, 2)))
            self.info.setText(EMPTY)
            return
        if self.info.text() == EMPTY:
            self.info.setText(HINT)
        # one brush object per kind: pyqtgraph renders each distinct (size, pen, brush) once, not once per node
        shared = {kind: pg.mkBrush(kind_colour(kind)) for kind in counts}
        drawn = np.flatnonzero(shown)
        pens = self._pens(base)
        self.graph.setData(pos=view.positions[drawn], size=node_sizes(view)[drawn],
                           symbolBrush=[shared[view.nodes[i].kind] for i in drawn],
                           symbolPen=[pens[i] for i in drawn],
                           symbol=["d" if view.nodes[i].kind == "entity" else "o" for i in drawn],
                           pxMode=True, data=drawn, hoverable=True, tip=self._tip)

    def _place_labels(self) -> None:
        """Name the selection, its neighbours, then the most important nodes on screen, as many as the zoom allows
        without two labels overlapping."""
        if not self.labels_button.isChecked() or not self.view.nodes:
            self.labels.clear()
            return
        chosen, near = self.highlighted()
        pinned = [] if chosen is None else [chosen, *sorted(near, key=lambda i: -self._weights[i])]
        radii = node_sizes(self.view) / 2 + OUTLINE_PX  # labels keep off the discs as drawn
        self.labels.place(self.view, self._weights, self._shown(), pinned, self._whole, radii)

    def _tip(self, x: float = 0.0, y: float = 0.0, data: Any = None) -> str:
        """The hovered node's whole statement and its kind, as plain text (tooltips never render markup:
        app.ui.plain_text)."""
        node = self.view.nodes[int(data)]
        detail = kind_name(node.kind) + (f" · importance {node.importance:.2f}" if node.memory_id is not None else "")
        return f"{node.label}\n{detail}"

    def _pens(self, base: QColor) -> list[Any]:
        """Node outlines: the selected node's thick, its neighbours' in the highlight colour, the rest plain (one pen
        object per kind of outline, as with brushes)."""
        plain = pg.mkPen(base)
        chosen, near = self.highlighted()
        pens = [plain] * len(self.view.nodes)
        if chosen is not None:
            mark = palette().color(QPalette.ColorRole.Highlight)
            neighbour = pg.mkPen(mark, width=2)
            for index in near:
                pens[index] = neighbour
            pens[chosen] = pg.mkPen(palette().color(QPalette.ColorRole.Text), width=3)
        return pens

    def _paint_edges(self, colour: QColor, shown: np.ndarray) -> None:
        view = self.view
        buckets = edge_buckets(view) if view.edges else np.zeros(0, dtype=int)
        ends = np.array([(e.a, e.b) for e in view.edges], dtype=int).reshape(-1, 2)
        keep = shown[ends].all(axis=1) if len(ends) else np.zeros(0, dtype=bool)  # a hidden node's links go too
        ends, buckets = ends[keep], buckets[keep]
        for index, (item, width) in enumerate(zip(self.edge_items, EDGE_WIDTHS)):
            chosen = ends[buckets == index].ravel()
            points = view.positions[chosen] if len(chosen) else np.zeros((0, 2))
            item.setData(points[:, 0], points[:, 1], pen=pg.mkPen(colour, width=width))

    def _failed(self, exc: BaseException) -> None:
        self._busy = False
        self.info.setText(f"Could not draw the graph: {exc}")

    def _on_click(self, _scatter: Any, points: Any, *_: Any) -> None:
        if not len(points):
            return
        self.select_node(self.view.nodes[int(points[0].data())])

    def select_node(self, node: Any) -> None:
        self.selected = node
        self.around_button.setEnabled(node.memory_id is not None)
        self.open_button.setEnabled(node.memory_id is not None)
        index = self.view.index_of(node.key)
        links = sum(1 for e in self.view.edges if index in (e.a, e.b))
        weight = f" · importance {node.importance:.2f}" if node.memory_id is not None else ""
        self.info.setText(f"{kind_name(node.kind)}{weight} · {counted(links, 'link')} — {node.label}")
        if self.view.nodes:
            self._paint()  # the outlines: it and its neighbours highlighted
        self.node_clicked.emit(node)

    def shutdown(self) -> None:
        self._layouts.shutdown(wait=False, cancel_futures=True)


def _extent(positions: np.ndarray) -> QRectF | None:
    if not len(positions):
        return None
    (x0, y0), (x1, y1) = positions.min(axis=0), positions.max(axis=0)
    return QRectF(float(x0), float(y0), max(float(x1 - x0), 1e-6), max(float(y1 - y0), 1e-6))
