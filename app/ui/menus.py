"""The menu bar: File, Edit, View, Window, Help, with the platform's standard keys (⌘ on the Mac, Ctrl elsewhere).

On macOS Qt moves Quit, Settings… and About into the application menu by their roles, where Mac users look for them.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QApplication, QMenu, QMessageBox

from app.services.platform import this_machine

# Edit actions act on whichever widget has the keyboard focus, when it has that method (text fields do).
EDIT_ACTIONS = (("Undo", QKeySequence.StandardKey.Undo, "undo"), ("Redo", QKeySequence.StandardKey.Redo, "redo"), None,
                ("Cut", QKeySequence.StandardKey.Cut, "cut"), ("Copy", QKeySequence.StandardKey.Copy, "copy"),
                ("Paste", QKeySequence.StandardKey.Paste, "paste"),
                ("Select All", QKeySequence.StandardKey.SelectAll, "selectAll"))


def standard_keys(standard: QKeySequence.StandardKey, fallback: str) -> list[QKeySequence]:
    """The platform's keys for a standard action; `fallback` where the platform defines none (Quit and
    Preferences have no binding off macOS and the Linux desktops)."""
    keys = QKeySequence.keyBindings(standard)
    return keys or [QKeySequence(fallback)]


def build_menus(window: Any) -> dict[str, QAction]:
    """Fill the window's menu bar; returns the actions by name (for the View menu's check marks and tests)."""
    bar = window.menuBar()
    actions: dict[str, QAction] = {}
    _file_menu(bar.addMenu("&File"), window, actions)
    _edit_menu(bar.addMenu("&Edit"), window, actions)
    _view_menu(bar.addMenu("&View"), window, actions)
    _window_menu(bar.addMenu("&Window"), window, actions)
    _help_menu(bar.addMenu("&Help"), window, actions)
    return actions


def _add(menu: QMenu, text: str, slot: Callable[[], Any], keys: list[QKeySequence] | None = None,
         role: QAction.MenuRole = QAction.MenuRole.NoRole) -> QAction:
    action = QAction(text, menu)
    if keys:
        action.setShortcuts(keys)
    action.setMenuRole(role)
    action.triggered.connect(lambda _checked=False: slot())
    menu.addAction(action)
    return action


def _file_menu(menu: QMenu, window: Any, actions: dict[str, QAction]) -> None:
    actions["new_chat"] = _add(menu, "New Chat", window.new_chat, standard_keys(QKeySequence.StandardKey.New, "Ctrl+N"))
    menu.addSeparator()
    actions["import"] = _add(menu, "Import Memories…", lambda: window.memories_action("on_import"))
    actions["export"] = _add(menu, "Export Memories…", lambda: window.memories_action("on_export"))
    actions["import_history"] = _add(menu, "Import from Another Assistant…", window.import_history)
    menu.addSeparator()
    actions["quit"] = _add(menu, "Quit Engram", window.quit_app, standard_keys(QKeySequence.StandardKey.Quit, "Ctrl+Q"),
                           QAction.MenuRole.QuitRole)


def _edit_menu(menu: QMenu, window: Any, actions: dict[str, QAction]) -> None:
    for entry in EDIT_ACTIONS:
        if entry is None:
            menu.addSeparator()
            continue
        text, standard, method = entry
        actions[method] = _add(menu, text, partial(_on_focus_widget, method), QKeySequence.keyBindings(standard))
    menu.addSeparator()
    actions["find"] = _add(menu, "Find", window.focus_search, standard_keys(QKeySequence.StandardKey.Find, "Ctrl+F"))


def _on_focus_widget(method: str) -> None:
    widget = QApplication.focusWidget()
    if widget is not None and callable(getattr(widget, method, None)):
        getattr(widget, method)()


def _view_menu(menu: QMenu, window: Any, actions: dict[str, QAction]) -> None:
    group = QActionGroup(menu)
    group.setExclusive(True)
    for number, spec in enumerate(window.specs, start=1):
        keys = [QKeySequence(f"Ctrl+{number}")] if number <= 9 else None  # ⌘1… on the Mac
        action = _add(menu, spec.title, partial(window.show_panel, spec.key), keys)
        action.setCheckable(True)
        group.addAction(action)
        actions[f"panel:{spec.key}"] = action
    menu.addSeparator()
    preferences = standard_keys(QKeySequence.StandardKey.Preferences, "Ctrl+,")
    actions["settings"] = _add(menu, "Settings…", window.open_settings, preferences, QAction.MenuRole.PreferencesRole)


def _window_menu(menu: QMenu, window: Any, actions: dict[str, QAction]) -> None:
    actions["minimize"] = _add(menu, "Minimize", window.showMinimized, [QKeySequence("Ctrl+M")])
    actions["zoom"] = _add(menu, "Zoom", lambda: window.showNormal() if window.isMaximized()
                           else window.showMaximized())
    menu.addSeparator()
    actions["front"] = _add(menu, "Engram", lambda: (window.showNormal(), window.raise_(), window.activateWindow()))


def _help_menu(menu: QMenu, window: Any, actions: dict[str, QAction]) -> None:
    actions["about"] = _add(menu, "About Engram", lambda: show_about(window), role=QAction.MenuRole.AboutRole)


def about_text() -> str:
    from app.ui.settings_panel import package_versions  # the versions the Settings panel lists too
    versions = package_versions()
    return (f"<h3>Engram {versions['engram']}</h3><p>A personal assistant whose language model runs on "
            f"{this_machine()} "
            f"and whose memory is one file you can see, correct and delete.</p>"
            f"<p>MLX {versions.get('mlx', '?')} · mlx-lm {versions.get('mlx-lm', '?')} · "
            f"Python {versions['Python']}</p>")


def show_about(window: Any) -> QMessageBox:
    """QMessageBox.about, with its text marked rich (every label left to guess shows plain text: app.ui.plain_text)
    and opened without blocking (a sheet on the Mac)."""
    box = QMessageBox(QMessageBox.Icon.NoIcon, "About Engram", about_text(), QMessageBox.StandardButton.Ok, window)
    box.setTextFormat(Qt.TextFormat.RichText)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    icon = QApplication.windowIcon()
    if not icon.isNull():
        box.setIconPixmap(icon.pixmap(64, 64))  # as QMessageBox.about shows it
    box.open()
    return box
