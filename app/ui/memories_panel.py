"""Memories: what Engram believes about you (the simple view, app.ui.memories_simple) beside the full table —
searchable, sortable, filterable, with a detail pane and the hand edits — and "Forget everything". The view chosen at
the top is remembered in settings.json.

Every read and write runs on the database lane; the panel only redraws from the results.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QButtonGroup, QComboBox, QFileDialog, QHBoxLayout, QHeaderView,
                               QInputDialog, QLabel, QLineEdit, QMessageBox, QPushButton, QSplitter, QStackedWidget,
                               QTableView, QTextBrowser, QVBoxLayout, QWidget)

from app.ui.add_memory import AddMemoryDialog, NewMemory
from app.ui.forget_all import ForgetEverything
from app.ui.memories_simple import SimpleMemories
from app.ui.memory_details import details_html
from app.ui.memory_table import (FLAG_FILTERS, KINDS, STATUSES, DeleteKeys, Filters, MemoryFilterProxy,
                                 MemoryTableModel, purged_words)
from app.ui.panel_widgets import ReloadOnShow, empty_state
from core.config import update_settings
from core.errors import NotFound
from core.importers.batches import memory_import_sources
from core.store.episodes import get_episodes
from core.store.memories import get_memories
from core.store.turns import last_recalled
from core.words import counted

VIEWS = (("simple", "About you"), ("full", "All details"))


class MemoriesPanel(ReloadOnShow, QWidget):
    loaded = Signal()  # after each reload, for tests and the graph panel

    def __init__(self, context: Any) -> None:
        super().__init__()
        self.context = context
        self.services = context.services
        self.runner = context.runner
        self.confirm: Callable[[str], bool] = self._ask  # replaced in tests
        self.model = MemoryTableModel()
        self.proxy = MemoryFilterProxy()
        self.proxy.setSourceModel(self.model)
        # A memory to select once the table has been read again, and the read that must have ended first: one
        # asked before the reveal (with the old filters) may end after it changed them.
        self._reveal_after_load: tuple[int, int] | None = None
        self._loads_asked = 0
        self._build()
        self.reload()

    # --- layout -----------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.simple = SimpleMemories()
        self.simple.delete_requested.connect(self.delete_ids)
        self.simple.wrong_requested.connect(self.reject_ids)
        self.pages = QStackedWidget()
        self.pages.addWidget(self.simple)
        self.pages.addWidget(self._full_page())
        layout = QVBoxLayout(self)
        layout.addLayout(self._top_bar())
        layout.addWidget(self.pages, 1)
        self.message = QLabel("")
        self.message.setWordWrap(True)  # a lineage notice runs to two lines
        layout.addWidget(self.message)
        self.set_view(self.services.settings.memories_view, remember=False)
        follow = getattr(self.context.window, "settings_changed", None)
        if follow is not None:  # the view chosen in another window or by hand in settings.json
            follow.connect(lambda settings: self.set_view(settings.memories_view, remember=False))
        store = getattr(self.context.window, "store_watch", None)
        if store is not None:  # `engram memory add` in a terminal beside the window shows here by itself
            store.moved.connect(self._changed_elsewhere)

    def _top_bar(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.view_buttons: dict[str, QPushButton] = {}
        group = QButtonGroup(self)
        group.setExclusive(True)
        for key, label in VIEWS:
            button = QPushButton(label)
            button.setCheckable(True)
            button.clicked.connect(lambda _=False, key=key: self.set_view(key))
            group.addButton(button)
            self.view_buttons[key] = button
            row.addWidget(button)
        self.add_button = QPushButton("Add a memory…")
        self.add_button.clicked.connect(self.on_add)
        row.addWidget(self.add_button)
        row.addStretch(1)
        self.forgetting = ForgetEverything(self, self.runner, self.services, done=self._done, failed=self._on_error)
        self.forget_all, self.bring_back = self.forgetting.forget, self.forgetting.bring_back
        row.addWidget(self.bring_back)
        row.addWidget(self.forget_all)
        return row

    def _full_page(self) -> QWidget:
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search memories")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.proxy.set_search)
        self.kind = self._combo(KINDS)
        self.status = self._combo(STATUSES)
        self.flag = self._combo(FLAG_FILTERS)
        filters = QHBoxLayout()
        for widget in (self.search, self.kind, self.status, self.flag):
            filters.addWidget(widget)
        self.table = self._table()
        self.detail = QTextBrowser()
        self.detail.setPlaceholderText("Select a memory to see its history.")
        # a placeholder does not wrap: the pane is never narrower than its hint
        self.detail.setMinimumWidth(self.detail.fontMetrics().horizontalAdvance(self.detail.placeholderText())
                                    + 2 * self.detail.frameWidth() + 2 * int(self.detail.document().documentMargin()))
        self.empty = empty_state("Nothing remembered yet. What you tell Engram about yourself in Chat appears here; "
                                 "add one yourself with Add a memory…, or bring in an export with File → Import "
                                 "Memories….")
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setSizes([860, 300])
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(filters)
        layout.addWidget(self.empty)
        layout.addWidget(split, 1)
        layout.addLayout(self._actions())
        return page

    def view(self) -> str:
        return "simple" if self.pages.currentWidget() is self.simple else "full"

    def set_view(self, key: str, *, remember: bool = True) -> None:
        """Show the simple list or the full table; a choice made here is saved (only that field, merged)."""
        key = key if key in self.view_buttons else "simple"
        self.pages.setCurrentIndex(0 if key == "simple" else 1)
        self.view_buttons[key].setChecked(True)
        for name, button in self.view_buttons.items():  # Fusion draws a checked button barely darker in dark mode
            font = button.font()
            font.setBold(name == key)
            button.setFont(font)
        if remember and key != self.services.settings.memories_view:
            try:
                settings = update_settings(self.services.data_dir, {"memories_view": key})
            except OSError as exc:
                self.message.setText(f"Could not remember the view: {exc}")
                return
            apply = getattr(self.context.window, "apply_settings", None)
            apply(settings) if apply is not None else setattr(self.services, "settings", settings)

    def _combo(self, items: Sequence[str]) -> QComboBox:
        combo = QComboBox()
        combo.addItems(items)
        combo.currentIndexChanged.connect(lambda _=None: self.reload())
        return combo

    def _table(self) -> QTableView:
        table = QTableView()
        table.setModel(self.proxy)
        table.setSortingEnabled(True)
        table.sortByColumn(6, Qt.SortOrder.DescendingOrder)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # the figures take what they need ...
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # ... and the statement the rest
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Interactive)
        table.setColumnWidth(2, 110)  # flags: "protected, permanent" is elided; the detail pane has them all
        for column in (7, 8):  # sources and status: in the detail pane, and status is the filter's choice
            table.setColumnHidden(column, True)
        table.setWordWrap(False)
        table.setTextElideMode(Qt.TextElideMode.ElideRight)
        table.verticalHeader().setVisible(False)
        table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 10)  # one line a memory
        table.selectionModel().selectionChanged.connect(self._selection_changed)

        def delete_if_enabled() -> None:
            if self.buttons["delete"].isEnabled():
                self.on_delete()
        # the table's keys only: ⌫ in the search box edits text
        self._delete_keys = DeleteKeys(table, delete_if_enabled)
        return table

    def _selection_changed(self, *_: Any) -> None:
        self._show_detail()
        self._enable_actions()

    def _actions(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.buttons = {}
        for name, label in (("pin", "Pin"), ("unpin", "Unpin"), ("protect", "Protect"), ("unprotect", "Unprotect"),
                            ("edit", "Edit…"), ("delete", "Delete"), ("restore", "Restore"), ("purge", "Purge…"),
                            ("export", "Export…"), ("import", "Import…")):
            button = QPushButton(label)
            button.clicked.connect(getattr(self, f"on_{name}"))
            self.buttons[name] = button
            row.addWidget(button)
        row.addStretch(1)
        self._enable_actions()
        return row

    def _enable_actions(self) -> None:
        """Only the actions that would change something for the selection (and the trash view) are offered."""
        selected = self.selected_memories()
        live = [m for m in selected if m.status != "trashed"]
        applies = {"pin": any(not m.pinned for m in live), "unpin": any(m.pinned for m in live),
                   "protect": any(not m.protected for m in live), "unprotect": any(m.protected for m in live),
                   "edit": len(selected) == 1 and bool(live), "delete": any(not m.protected for m in live),
                   "restore": any(m.status in ("trashed", "forgotten") for m in selected),
                   "purge": self.filters().status == "trashed" and self.model.rowCount() > 0}
        for name, button in self.buttons.items():
            button.setEnabled(applies.get(name, True))  # export and import always apply

    # --- data -------------------------------------------------------------------------------------------
    def filters(self) -> Filters:
        kind = self.kind.currentText()
        status = self.status.currentText()
        flag = self.flag.currentText()
        return Filters(kind=None if kind == KINDS[0] else kind, status=None if status == "all" else status,
                       flag=None if flag == FLAG_FILTERS[0] else flag)

    def reload(self) -> None:
        filters = self.filters()
        self._loads_asked += 1
        asked = self._loads_asked

        def load() -> tuple[list, list, dict, dict]:  # the table's rows, the simple view's, recalls, imports
            manager = self.services.manager()
            rows = manager.list(**filters.as_kwargs())
            return (rows, rows if filters == Filters() else manager.list(**Filters().as_kwargs()),
                    last_recalled(self.services.db), memory_import_sources(self.services.db))
        self.runner.submit("db", load, on_done=lambda loaded: self._on_loaded(loaded, asked), on_error=self._on_error)

    def _changed_elsewhere(self) -> None:
        """Another connection committed: re-read now if the panel is on screen; hidden, it re-reads when shown
        (ReloadOnShow)."""
        if self.isVisible():
            self.reload()

    def _on_loaded(self, loaded: tuple[list, list, dict, dict], asked: int) -> None:
        memories, active, recalled, imported = loaded
        # the same rows (a commit elsewhere that touched no memory) keep the selection and the scroll position
        if active != self.simple.memories or imported != self.simple.imported:
            self.simple.set_memories(active, imported)
        if memories != self.model.memories or recalled != self.model.recalled:
            kept = self.selected_ids()  # Pin, Protect, Edit reload the table: what was selected stays selected
            self.model.set_memories(memories, recalled)
            self._select_again(kept)
        self.empty.setVisible(not memories and self.filters() == Filters())
        self._enable_actions()
        if self._reveal_after_load is not None and asked >= self._reveal_after_load[1]:
            wanted, self._reveal_after_load = self._reveal_after_load[0], None
            self.select_memory(wanted)
        self.loaded.emit()

    def _select_again(self, ids: Sequence[int]) -> None:
        listed: dict[int, int] = {m.id: row for row, m in enumerate(self.model.memories)}
        selection = self.table.selectionModel()
        for memory_id in ids:
            if memory_id in listed:
                index = self.proxy.mapFromSource(self.model.index(listed[memory_id], 0))
                selection.select(index, selection.SelectionFlag.Select | selection.SelectionFlag.Rows)
        self._show_detail()  # a row that left this view (deleted, in "active") leaves the detail pane too

    def selected_ids(self) -> list[int]:
        return [memory.id for memory in self.selected_memories()]

    def selected_memories(self) -> list[Any]:
        rows = {self.proxy.mapToSource(i).row() for i in self.table.selectionModel().selectedRows()}
        return [self.model.memory_at(r) for r in sorted(rows)]

    def select_memory(self, memory_id: int) -> bool:
        """Select the row of one memory with its history (chips in the chat panel jump here): the full view, for
        this visit only."""
        self.set_view("full", remember=False)
        for row, memory in enumerate(self.model.memories):
            if memory.id == memory_id:
                index = self.proxy.mapFromSource(self.model.index(row, 0))
                self.table.selectRow(index.row())
                return True
        return False

    def reveal_memory(self, memory_id: int) -> None:
        """Show one memory selected whatever the filters were (a chip, a Remembered row): when the table does not
        list it, the filters change to the ones that do (its own state, any kind, any flag, no search)."""
        if self._select_listed(memory_id):
            return

        def state(db: Any) -> str | None:
            found = get_memories(db, [memory_id]).get(memory_id)
            return None if found is None else found.status

        def show(status: str | None) -> None:
            if status is None:
                self.message.setText("That memory is gone: it was purged.")
                return
            for combo, text in ((self.kind, KINDS[0]), (self.status, status), (self.flag, FLAG_FILTERS[0])):
                combo.blockSignals(True)
                combo.setCurrentText(text)
                combo.blockSignals(False)
            self.search.clear()
            self.reload()
            self._reveal_after_load = (memory_id, self._loads_asked)
        self.runner.submit("db", state, self.services.db, on_done=show, on_error=self._on_error)

    def _select_listed(self, memory_id: int) -> bool:
        """Select it if the table lists it and the search shows it."""
        if not self.select_memory(memory_id):
            return False
        return bool(self.table.selectionModel().selectedRows())

    def focus_search(self) -> None:
        self.set_view("full", remember=False)  # the search box is the table's
        self.search.setFocus()
        self.search.selectAll()

    def _show_detail(self) -> None:
        ids = self.selected_ids()
        if len(ids) != 1:
            self.detail.clear()
            return
        def load() -> str:
            details = self.services.manager().show(ids[0])
            sources = get_episodes(self.services.db, list(details.memory.source_episode_ids))
            return details_html(details, sources)
        self.runner.submit("db", load, on_done=self.detail.setHtml, on_error=self._on_detail_error)

    def _on_detail_error(self, exc: BaseException) -> None:
        # A memory purged or forgotten for good since it was selected: the table is reloading; say nothing, so
        # the message of what was just done ("Purged 1 memory…") stays.
        if isinstance(exc, NotFound):
            self.detail.clear()
        else:
            self._on_error(exc)

    # --- actions ----------------------------------------------------------------------------------------
    def _apply(self, verb: str, ids: Sequence[int], fn: Callable[[Any, int], Any], *,
               changes_content: bool = False) -> None:
        if not ids:
            self.message.setText("Select one or more memories first.")
            return
        def work() -> str:
            manager = self.services.manager()
            with self.services.db.transaction():
                for memory_id in ids:
                    fn(manager, memory_id)
            done = f"{verb} {counted(len(ids), 'memory')}."
            return _with_adapter_notice(done, self.services.db, ids) if changes_content else done
        self.runner.submit("db", work, on_done=self._done, on_error=self._on_error)

    def on_pin(self) -> None:
        self._apply("Pinned", self.selected_ids(), lambda m, i: m.pin(i, "pinned by hand"))

    def on_unpin(self) -> None:
        self._apply("Unpinned", self.selected_ids(), lambda m, i: m.unpin(i, "unpinned by hand"))

    def on_protect(self) -> None:
        self._apply("Protected", self.selected_ids(), lambda m, i: m.protect(i, "protected by hand"))

    def on_unprotect(self) -> None:
        self._apply("Unprotected", self.selected_ids(), lambda m, i: m.unprotect(i, "unprotected by hand"))

    def on_delete(self) -> None:
        self._apply("Moved to the trash:", self.selected_ids(), lambda m, i: m.delete(i, "deleted by hand"),
                    changes_content=True)

    def delete_ids(self, ids: Sequence[int]) -> None:
        self._apply("Moved to the trash:", list(ids), lambda m, i: m.delete(i, "deleted by hand"),
                    changes_content=True)

    def reject_ids(self, ids: Sequence[int]) -> None:
        """"This is wrong": to the trash, and Engram will not learn it again (restoring it takes that back)."""
        self._apply("Engram will not learn this again; in the trash:", list(ids),
                    lambda m, i: m.reject(i, "you said this is wrong"), changes_content=True)

    @property
    def forget_dialog(self) -> Any:
        return self.forgetting.dialog

    def on_restore(self) -> None:
        self._apply("Restored", self.selected_ids(), lambda m, i: m.restore(i, "restored by hand"))

    def on_edit(self) -> None:
        ids = self.selected_ids()
        if len(ids) != 1:
            self.message.setText("Select one memory to edit.")
            return
        memory = next(m for m in self.model.memories if m.id == ids[0])
        text, ok = QInputDialog.getMultiLineText(self, "Edit memory", "Statement", memory.statement)
        if ok and text.strip() and text != memory.statement:
            self.edit_statement(ids[0], text)

    def on_add(self) -> None:
        dialog = AddMemoryDialog(self)
        if dialog.exec():
            self.add_memory(dialog.memory())

    def add_memory(self, new: NewMemory) -> None:
        def work() -> str:  # the embedder loads here, off the GUI thread, the first time
            added = self.services.manager(with_embedder=True).remember(new.statement, **new.as_kwargs())
            return ("Already remembered; it is more certain now." if added.existed
                    else f"Remembered: {added.memory.statement}")
        self.runner.submit("db", work, on_done=self._done, on_error=self._on_error)

    def edit_statement(self, memory_id: int, text: str) -> None:
        def work() -> str:  # the embedder loads here, off the GUI thread, the first time
            self.services.manager(with_embedder=True).edit(memory_id, statement=text, reason="edited by hand")
            return _with_adapter_notice("Saved; the old text stays in its history.", self.services.db, [memory_id])
        self.runner.submit("db", work, on_done=self._done, on_error=self._on_error)

    def on_purge(self) -> None:
        ids = self.selected_ids() if self.filters().status == "trashed" else []
        what = counted(len(ids), "selected memory") if ids else "everything in the trash"
        if not self.confirm(f"Purge {what}? The text is erased from the file and cannot be restored."):
            return
        def work() -> Any:
            return self.services.manager().purge(ids or None, [] if ids else None, reason="purged by hand")
        self.runner.submit("db", work, on_done=lambda r: self._done(purged_words(r)), on_error=self._on_error)

    def on_export(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export memories", "engram-export.json", "JSON (*.json)")
        if path:
            self.export_to(path)

    def export_to(self, path: str) -> None:
        self.runner.submit("db", lambda: self.services.manager().export_to(path),
                           on_done=lambda counts: self._done(
                               f"Exported {counted(counts.get('memories', 0), 'memory')}."),
                           on_error=self._on_error)

    def on_import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import memories", "", "JSON (*.json)")
        if path:
            self.import_from(path)

    def import_from(self, path: str) -> None:
        self.runner.submit("db", lambda: self.services.manager(with_embedder=True).import_from(path),
                           on_done=lambda r: self._done(f"Imported {counted(len(r.memories), 'memory')}."),
                           on_error=self._on_error)

    def _done(self, text: str) -> None:
        self.message.setText(text)
        changed = getattr(self.context.window, "memories_changed", None)
        if changed is not None:
            changed.emit()  # this table reloads with the other views of the store (the graph)
        else:
            self.reload()
        self._show_detail()

    def _on_error(self, exc: BaseException) -> None:
        self.message.setText(f"Could not do that: {exc}")

    def _ask(self, question: str) -> bool:
        button = QMessageBox.StandardButton
        answer = QMessageBox.question(self, "Engram", question, button.Yes | button.Cancel, button.Cancel)
        return answer == button.Yes


def _with_adapter_notice(message: str, db: Any, memory_ids: Sequence[int]) -> str:
    """The lineage promise: when a change touches what the active adapter learned from, Engram says so."""
    from core.finetune.adapters import active_adapter_notice
    notice = active_adapter_notice(db, "memory", memory_ids)
    return f"{message} {notice}" if notice else message

