"""The main window: a sidebar of panels, each built the first time it is shown so the window opens fast."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (QApplication, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QMainWindow,
                               QMessageBox, QStackedWidget, QVBoxLayout, QWidget)

from app.ui.chat_memory_watch import StoreWatch
from app.ui.icons import icon_size, themed_icon
from app.ui.tasks import TaskRunner
from app.ui.theme import SPACING, Theme
from app.ui.menus import build_menus
from app.ui.plain_text import guard_plain_text
from app.ui.settings_watch import SettingsWatcher
from core.errors import NotFound


@dataclass(frozen=True)
class PanelSpec:
    key: str
    title: str
    module: str
    cls: str


PANELS = (
    PanelSpec("chat", "Chat", "app.ui.chat_panel", "ChatPanel"),
    PanelSpec("memories", "Memories", "app.ui.memories_panel", "MemoriesPanel"),
    PanelSpec("graph", "Memory graph", "app.ui.graph_panel", "GraphPanel"),
    PanelSpec("hypotheses", "Hypotheses", "app.ui.hypotheses_panel", "HypothesesPanel"),
    PanelSpec("timeline", "Forgetting", "app.ui.timeline_panel", "TimelinePanel"),
    PanelSpec("jobs", "Jobs", "app.ui.jobs_panel", "JobsPanel"),
    PanelSpec("models", "Models", "app.ui.models_panel", "ModelsPanel"),
    PanelSpec("settings", "Settings", "app.ui.settings_panel", "SettingsPanel"),
)


@dataclass
class PanelContext:
    """What every panel is given: the services (store, models) and the background task runner."""
    services: Any
    runner: TaskRunner
    window: "MainWindow"


def available_panels() -> list[PanelSpec]:
    """The panels this build contains, in sidebar order."""
    return [spec for spec in PANELS if importlib.util.find_spec(spec.module) is not None]


class MainWindow(QMainWindow):
    memories_changed = Signal()  # a turn or an edit changed the store: panels that show memories redraw
    settings_changed = Signal(object)  # the Settings now in force (a save here, or settings.json changed outside)
    background: Any = None  # app/ui/background_jobs.BackgroundJobs, started by launch()
    onboarding: Any = None  # app/ui/onboarding.Onboarding, on a first start

    def __init__(self, services: Any, runner: TaskRunner | None = None) -> None:
        super().__init__()
        guard_plain_text()  # data in a label is never rendered as markup (app.ui.plain_text)
        self.services = services
        self.runner = runner or TaskRunner(self)
        self.context = PanelContext(services=services, runner=self.runner, window=self)
        self.specs = available_panels()
        self.panels: dict[str, QWidget] = {}
        self.setWindowTitle("Engram")
        self.resize(1180, 760)
        self.exit_application: Callable[[], None] = QApplication.quit  # after the window closed on Quit
        self.theme = Theme(QApplication.instance(), services.settings.appearance, self)  # app-wide: light or dark
        self._build()
        self.theme.changed.connect(self._tint_icons)
        self.menu_actions = build_menus(self)  # File, Edit, View, Window, Help, with their standard keys
        self.memories_changed.connect(self._refresh_memory_views)
        # one look at the store's data_version for every panel: another process (the CLI) or an idle-time job's
        # connection changed it; started once the event loop runs, so the window shows before any query
        self.store_watch = StoreWatch(services, self.runner, self)
        QTimer.singleShot(0, self, self.store_watch.start)
        self.settings_watcher = SettingsWatcher(services.data_dir, self)
        self.settings_watcher.changed.connect(self.apply_settings)
        QTimer.singleShot(0, self, self._serve_if_switched_on)  # Settings' switch survives a restart (app.serve.in_app)
        if self.specs:
            self.show_panel(self.specs[0].key)

    def _build(self) -> None:
        self.setAcceptDrops(True)  # a model folder, a .gguf or an export dropped anywhere (dropEvent)
        self.sidebar = QListWidget()
        self.sidebar.setObjectName("sidebar")  # styled by app/ui/theme.style_sheet
        self.sidebar.setIconSize(icon_size(18))
        self.sidebar.setSpacing(1)
        self.stack = QStackedWidget()
        row_height = max(self.sidebar.fontMetrics().height(), 18) + 2 * SPACING.s  # not left to the first polish
        for spec in self.specs:
            item = QListWidgetItem(spec.title)
            item.setData(Qt.ItemDataRole.UserRole, spec.key)
            item.setSizeHint(QSize(0, row_height))
            self.sidebar.addItem(item)
        self._tint_icons()
        self.sidebar.currentItemChanged.connect(self._on_sidebar)
        body = QWidget()
        layout = QHBoxLayout(body)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._sidebar_pane())
        layout.addWidget(self.stack, 1)
        self.setCentralWidget(body)
        self.status = QLabel("")
        self.statusBar().addPermanentWidget(self.status)

    def _sidebar_pane(self) -> QWidget:
        """The app's name over the list of panels, on the sidebar's own background."""
        pane = QWidget()
        pane.setObjectName("sidebarPane")
        # a plain QWidget paints a style-sheet background only so
        pane.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        pane.setFixedWidth(188)
        column = QVBoxLayout(pane)
        column.setContentsMargins(0, SPACING.s, 0, SPACING.s)
        column.setSpacing(SPACING.xs)
        title = QLabel("Engram")
        title.setObjectName("sidebarTitle")
        column.addWidget(title)
        column.addWidget(self.sidebar, 1)
        return pane

    def _tint_icons(self, _scheme: str = "") -> None:
        """Each panel's icon in the palette's text colour: redrawn when light and dark mode switch."""
        pal = QApplication.palette()
        for row, spec in enumerate(self.specs):
            try:
                self.sidebar.item(row).setIcon(themed_icon(spec.key, pal))
            except NotFound:
                pass  # a panel without an icon of its own keeps its title alone

    def _on_sidebar(self, current: QListWidgetItem | None, _previous: Any = None) -> None:
        if current is not None:
            self.show_panel(current.data(Qt.ItemDataRole.UserRole))

    def panel(self, key: str) -> QWidget | None:
        """The panel, built the first time it is asked for (shown or not)."""
        spec = next((s for s in self.specs if s.key == key), None)
        if spec is None:
            return None
        panel = self.panels.get(key)
        if panel is None:
            module = importlib.import_module(spec.module)
            panel = getattr(module, spec.cls)(self.context)
            self.panels[key] = panel
            self.stack.addWidget(panel)
        return panel

    def show_panel(self, key: str) -> QWidget | None:
        panel = self.panel(key)
        if panel is None:
            return None
        self.stack.setCurrentWidget(panel)
        row = next(i for i, s in enumerate(self.specs) if s.key == key)
        if self.sidebar.currentRow() != row:
            self.sidebar.setCurrentRow(row)
        view = getattr(self, "menu_actions", {}).get(f"panel:{key}")
        if view is not None:
            view.setChecked(True)
        return panel

    def _refresh_memory_views(self) -> None:
        for key, method in (("graph", "refresh"), ("memories", "reload")):
            panel = self.panels.get(key)
            if panel is not None and hasattr(panel, method):
                getattr(panel, method)()

    def apply_settings(self, settings: Any) -> None:
        """Make `settings` the ones in force everywhere: the services and every panel built so far."""
        if settings == self.services.settings:
            return
        self.services.settings = settings
        self.theme.set_appearance(settings.appearance)
        for key, method in (("settings", "follow"), ("models", "refresh"), ("chat", "check_model")):
            panel = self.panels.get(key)
            if panel is not None and hasattr(panel, method):
                getattr(panel, method)(settings) if method == "follow" else getattr(panel, method)()
        self.settings_changed.emit(settings)

    # -- dropped on the window: a model folder or a .gguf is added, as LM Studio and Jan do; an export from
    # -- another assistant (a .zip, .json or .txt) is imported (app.ui.import_history) -----------------------------

    @staticmethod
    def _dropped(event: Any) -> tuple[list[str], list[str]]:
        """(model paths, history exports) among the local files dropped."""
        from app.ui.import_history import droppable
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        paths = [u.toLocalFile() for u in urls if u.isLocalFile()]
        models = [p for p in paths if Path(p).is_dir() or p.lower().endswith(".gguf")]
        return models, [p for p in paths if p not in models and droppable(p)]

    def dragEnterEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        if any(self._dropped(event)):
            event.acceptProposedAction()

    def dropEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        models, exports = self._dropped(event)
        if not models and not exports:
            return
        event.acceptProposedAction()
        if models:
            panel: Any = self.show_panel("models")  # a ModelsPanel, imported when first shown (PanelSpec)
            if panel is not None:
                panel.add_path(models[0])  # one at a time: a conversion takes the panel's progress bar
        else:
            self.import_history(exports[0])

    def open_memory(self, memory_id: int) -> None:
        """Show the memory in the Memories panel, selected with its history (once its table has loaded)."""
        panel: Any = self.show_panel("memories")  # a MemoriesPanel, imported when first shown (PanelSpec)
        if panel is None:
            return
        if panel.model.memories or not panel.isVisible():
            panel.reveal_memory(memory_id)  # whatever its filters were ("trashed" last time)
            return

        def when_loaded() -> None:  # the table's first read is still under way
            panel.loaded.disconnect(when_loaded)
            panel.reveal_memory(memory_id)
        panel.loaded.connect(when_loaded)

    def new_chat(self) -> None:
        panel = self.show_panel("chat")
        if panel is not None and hasattr(panel, "new_conversation"):
            panel.new_conversation()

    def focus_search(self) -> None:
        panel = self.stack.currentWidget()
        if panel is not None and hasattr(panel, "focus_search"):
            panel.focus_search()

    def open_settings(self) -> None:
        self.show_panel("settings")

    def import_history(self, path: str | None = None) -> None:
        """File → Import from Another Assistant… (a file dialog), or the export dropped on the window."""
        from app.ui.import_history import attach
        importer = attach(self)
        importer.start(path) if path else importer.choose()

    def memories_action(self, method: str) -> None:
        """File → Import/Export: the Memories panel's own action, shown in its panel."""
        panel = self.show_panel("memories")
        if panel is not None and hasattr(panel, method):
            getattr(panel, method)()

    def quit_app(self) -> None:
        """File → Quit (⌘Q / Ctrl+Q): close the window the usual way (jobs checkpoint, the store closes), then
        end the application, which on the Mac would otherwise stay running without a window."""
        if self.close():
            self.exit_application()

    def show_onboarding(self) -> Any:
        """The first-start screen beside the window; dismissing it is remembered, so it is shown once."""
        from app.ui.onboarding import Onboarding, mark_onboarding_seen, recommendation
        dialog = Onboarding(self.services.db_path, lambda: self.show_panel("models"), self)
        dialog.finished.connect(lambda _result: mark_onboarding_seen(self.services.data_dir))
        # the recommendation measures this machine's speed once (MLX loads for it): after the window is up
        QTimer.singleShot(3000, self, lambda: self.runner.submit(
            "io", recommendation, self.services.data_dir, self.services.mlx_worker,
            on_done=dialog.show_recommendation, on_error=lambda _exc: None))
        self.onboarding = dialog
        dialog.show()  # not modal: the window behind it stays usable
        return dialog

    def _first_start_screen(self) -> None:
        if self.isVisible():  # a window closed (or never shown) before the event loop ran has no one to greet
            self.show_onboarding()

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def _serve_if_switched_on(self) -> None:
        if self.services.settings.serve_api and self.isVisible():  # a window closed before the loop ran serves none
            from app.serve.in_app import attach
            try:
                attach(self).start(self.services.settings.serve_port)
            except OSError as exc:
                self.set_status(f"Not serving your memory to other apps: port {self.services.settings.serve_port} "
                                f"is taken ({exc.strerror or exc})")

    def closeEvent(self, event: Any) -> None:
        self.store_watch.stop()
        server = getattr(self, "api_server", None)  # app.serve.in_app keeps it on the window once started
        if server is not None:
            server.stop()  # before the store and the models close: no other app's chat is left using them
        if self.background is not None:
            self.background.stop()  # its running job checkpoints before the store and the models close
        for panel in self.panels.values():
            if hasattr(panel, "shutdown"):
                panel.shutdown()
        self.runner.shutdown(wait=True)
        close = getattr(self.services, "close", None)
        if close is not None:
            close()  # after the lanes stopped: nothing else can be using the store now
        super().closeEvent(event)


def launch(argv: list[str] | None = None) -> int:
    from app.services.wiring import Services
    app = QApplication.instance() or QApplication(argv or sys.argv[:1])
    app.setApplicationName("Engram")
    app.setOrganizationName("Engram")
    from app.services.resources import APP_ICON, resource_path
    QApplication.setWindowIcon(QIcon(str(resource_path(APP_ICON))))  # the Dock and window switcher on a source run
    from models.mlx_requirements import installed_mlx_problem
    problem = installed_mlx_problem()  # an older mlx: one line now, not an AttributeError at the first reply
    if problem:
        print(f"engram: {problem}", file=sys.stderr)
        QMessageBox.critical(None, "Engram", problem)
        return 1
    from app.ui.gc import GuiThreadCollector
    GuiThreadCollector(app).start()  # Qt objects in garbage cycles are destroyed on this thread, not on a lane
    services = Services.from_data_dir(lasting=True)
    window = open_main_window(services)
    from app.ui.background_jobs import BackgroundJobs
    window.background = BackgroundJobs(services).start(app)  # idle-time learning while the app is open
    window.show()
    return app.exec()


def open_main_window(services: Any) -> MainWindow:
    """The window on its first panel: Chat, or on a first start (no model chosen) Models, which offers the model
    recommended for this Mac; the first-start screen over it until it has been dismissed once."""
    from app.ui.onboarding import onboarding_seen
    window = MainWindow(services)
    if not services.settings.chat_model:
        window.show_panel("models")
    if not onboarding_seen(services.data_dir):
        QTimer.singleShot(0, window, window._first_start_screen)  # once the window is on screen, over it
    return window
