"""Jobs and fine-tune: the scheduler's conditions, the queue with progress and ETA, the live loss curve of a
fine-tune, and the adapter versions with their gate scores (activate, roll back).

The panel polls the store on the database lane while it is visible. A job the user starts is picked up by
the app's background scheduler (app/ui/background_jobs.py) when it runs, else by JobHost's own thread.
Pause and cancel are requests in the store, honoured by the job at its next checkpoint.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QGroupBox, QHBoxLayout, QHeaderView, QLabel,
                               QPushButton, QSplitter, QTableView, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from app.ui.jobs_state import JobHost, JobRow, JobsSnapshot, LossHistory, SchedulerFactory, read_jobs
from app.ui.jobs_table import JobsTableModel
from app.ui.panel_widgets import (FractionBarDelegate, PaletteFollower, accent, empty_state, heading, themed_plot,
                                  when)
from core.finetune import adapters as versions
from core.jobs import FINETUNE
from core.store import jobs as store

POLL_MS = 1000
CONDITIONS_EVERY = 5.0  # seconds between reads of idle time and power (a subprocess on the Mac)
POLL_RUNNING_MS = 300  # faster while a job runs, so progress and the loss curve move smoothly
ADAPTER_COLUMNS = ("Version", "Status", "Probe loss", "General ppl", "Created", "Notes")
ID_ROLE = Qt.ItemDataRole.UserRole + 1


def adapter_scores(adapter: versions.Adapter) -> tuple[str, str]:
    m = adapter.metrics
    if "baseline" not in m or "candidate" not in m:
        return "—", "—"
    return (f"{m['baseline']['probe_loss']:.3f} → {m['candidate']['probe_loss']:.3f}",
            f"{m['baseline']['general_ppl']:.1f} → {m['candidate']['general_ppl']:.1f}")


def started_words(kind: str, waiting: Optional[str]) -> str:
    """What Run now did: started, or queued and why it is not running yet, in words a person can act on."""
    name = kind.capitalize()
    if waiting is None:
        return f"{name} started."
    if waiting.startswith("learning from your messages"):
        return (f"{name} starts in a moment: Engram is learning from your last message and hands the model over "
                "to it at its next step (the reflection learns that message first).")
    if waiting == "chat is using the model":
        return f"{name} starts as soon as the reply being written ends."
    return f"{name} is queued to run now; it waits: {waiting}."


class JobsPanel(QWidget):
    refreshed = Signal()  # after each poll, for tests
    job_finished = Signal(object)  # the final Job row of a job started here

    def __init__(self, context: Any, *, scheduler_factory: SchedulerFactory | None = None) -> None:
        super().__init__()
        self.context = context
        self.services = context.services
        self.runner = context.runner
        self.background = getattr(context.window, "background", None)  # the app's idle-time loop, if running
        self.scheduler_factory = scheduler_factory or self._shared_scheduler
        self.host = JobHost(self.services, self.scheduler_factory)
        self._watching: set[int] = set()  # jobs started here, until they finish
        self._conditions_at = -CONDITIONS_EVERY
        self.snapshot: Optional[JobsSnapshot] = None
        self.losses = LossHistory()
        self._scheduler: Any = None
        self._busy = False
        self._build()
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self._tick)
        self.timer.start()
        self.refresh()

    # --- layout -----------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.conditions = QLabel("Reading the scheduler…")
        self.conditions.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.conditions)
        layout.addLayout(self._queue_actions())
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self._queue_box())
        split.addWidget(self._training_box())
        split.setSizes([300, 360])
        layout.addWidget(split, 1)
        self.imports_label = QLabel("")  # learning from imported history: how far (app.ui.jobs_state)
        self.imports_label.setWordWrap(True)
        self.imports_label.setVisible(False)
        layout.addWidget(self.imports_label)
        self.message = QLabel("")
        layout.addWidget(self.message)

    def _queue_actions(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.kind = QComboBox()
        self.kind.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.run_kind_button = QPushButton("Run now")
        self.run_kind_button.setToolTip("Start this job now, without waiting for you to be away")
        self.tonight_button = QPushButton("Fine-tune tonight")
        self.tonight_button.setToolTip("Queue a fine-tune for the quiet hours")
        self.run_kind_button.clicked.connect(lambda: self.run_now(self.kind.currentText()))
        self.tonight_button.clicked.connect(self.finetune_tonight)
        for widget in (QLabel("Job"), self.kind, self.run_kind_button, self.tonight_button):
            row.addWidget(widget)
        row.addStretch(1)
        return row

    def _queue_box(self) -> QGroupBox:
        box = QGroupBox("Queue")
        self.jobs_model = JobsTableModel()
        self.jobs = QTableView()
        self.jobs.setModel(self.jobs_model)
        self._look(self.jobs)
        self.jobs.setItemDelegateForColumn(2, FractionBarDelegate(self.jobs))
        header = self.jobs.horizontalHeader()
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        for column in (0, 1, 5):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.jobs.setColumnWidth(2, 130)
        self.jobs.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self.jobs_empty = empty_state("No jobs yet. Reflection, consolidation and forgetting run while you are "
                                      "away; a fine-tune runs in the quiet hours.")
        self.start_button = QPushButton("Run now")
        self.pause_button = QPushButton("Pause")
        self.cancel_button = QPushButton("Cancel")
        buttons = QHBoxLayout()
        for button, handler in ((self.start_button, self.on_start), (self.pause_button, self.on_pause),
                                (self.cancel_button, self.on_cancel)):
            button.setEnabled(False)
            button.clicked.connect(handler)
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout = QVBoxLayout(box)
        layout.addWidget(self.jobs_empty)
        layout.addWidget(self.jobs, 1)
        layout.addLayout(buttons)
        return box

    def _training_box(self) -> QGroupBox:
        box = QGroupBox("Fine-tune")
        self.loss_plot = themed_plot()
        self.loss_plot.setLabel("left", "training loss")
        self.loss_plot.setLabel("bottom", "step")
        self.loss_plot.setMinimumWidth(280)
        self.loss_curve = self.loss_plot.plot([], [], symbol="o", symbolSize=5)
        self._colour_loss()
        PaletteFollower(self.loss_plot, self._colour_loss)  # accent colours differ in light and dark mode
        self.loss_title = heading("Training loss")
        self.loss_empty = empty_state("The loss curve of a fine-tune appears here while it trains. "
                                      "Start one with Run now, or queue one with Fine-tune tonight.")
        self.adapters = self._table(ADAPTER_COLUMNS)
        header = self.adapters.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in (1, 2, 3, 4, 5):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.adapters.setToolTip("Probe loss: on held-out situations where your preferences should show, and "
                                 "replies you rated good that it never trained on (lower is better). General ppl: "
                                 "perplexity on everyday text; it and common-knowledge answers must not get worse.")
        self.adapters.itemSelectionChanged.connect(self._update_buttons)
        self.activate_button = QPushButton("Activate")
        self.rollback_button = QPushButton("Roll back to the base model")
        self.activate_button.setEnabled(False)
        self.activate_button.clicked.connect(self.on_activate)
        self.rollback_button.clicked.connect(self.on_rollback)
        self.active_label = QLabel("")
        self.active_label.setWordWrap(True)
        self.readiness_label = QLabel("")  # why no fine-tune is queued: too little to learn from yet
        self.readiness_label.setWordWrap(True)
        self.readiness_label.setVisible(False)
        buttons = QHBoxLayout()
        for widget in (self.activate_button, self.rollback_button):
            buttons.addWidget(widget)
        buttons.addWidget(self.active_label, 1)
        left = QVBoxLayout()
        left.addWidget(self.loss_title)
        left.addWidget(self.readiness_label)
        left.addWidget(self.loss_plot, 1)
        left.addWidget(self.loss_empty, 1)
        self.loss_plot.setVisible(False)
        right = QVBoxLayout()
        right.addWidget(heading("Adapter versions"))
        right.addWidget(self.adapters, 1)
        right.addLayout(buttons)
        layout = QHBoxLayout(box)
        layout.addLayout(left, 2)
        layout.addLayout(right, 3)
        return box

    def _table(self, columns: Sequence[str]) -> QTableWidget:
        table = QTableWidget(0, len(columns))
        table.setHorizontalHeaderLabels(columns)
        self._look(table)
        return table

    @staticmethod
    def _look(table: QTableView) -> None:
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.verticalHeader().setVisible(False)
        table.setAlternatingRowColors(True)

    # --- reading ----------------------------------------------------------------------------------------
    def _tick(self) -> None:
        if self.isVisible() or self._watching:  # a job started here (Reflect now in Hypotheses) is followed
            self.refresh()

    def refresh(self) -> None:
        if self._busy:
            return
        self._busy = True
        self.runner.submit("db", self._read, on_done=self._show, on_error=self._failed)

    def _shared_scheduler(self, services: Any, db: Any) -> Any:
        """The real scheduler, seeing the same user activity and chat state as the background loop."""
        options = self.background.scheduler_options(db) if self.background is not None else {}
        return services.scheduler(db=db, **options)

    def _scheduler_on_lane(self) -> Any:
        if self._scheduler is None:  # built on the lane: building it may probe the machine
            self._scheduler = self.scheduler_factory(self.services, self.services.db)
        return self._scheduler

    def _read(self) -> JobsSnapshot:
        self._scheduler_on_lane()
        fresh = time.monotonic() - self._conditions_at >= CONDITIONS_EVERY
        if fresh:
            self._conditions_at = time.monotonic()
        return read_jobs(self._scheduler, with_conditions=fresh)

    def _show(self, snapshot: JobsSnapshot) -> None:
        self._busy = False
        self.snapshot = snapshot
        if snapshot.conditions is not None:
            self.conditions.setText(self._conditions_text(snapshot.conditions.summary()))
        if snapshot.finetune_not_ready is not None:
            self.readiness_label.setText(f"No fine-tune queued: {snapshot.finetune_not_ready}")
            self.readiness_label.setVisible(bool(snapshot.finetune_not_ready))
        if snapshot.imports is not None:
            self.imports_label.setText(snapshot.imports)
            self.imports_label.setVisible(bool(snapshot.imports))
        if [self.kind.itemText(i) for i in range(self.kind.count())] != snapshot.kinds:
            self.kind.clear()
            self.kind.addItems(snapshot.kinds)
        self._fill_jobs(snapshot.jobs)
        self._fill_adapters(snapshot.adapters)
        self._draw_loss(snapshot.jobs)
        self._update_buttons()
        self._announce_finished(snapshot.jobs)
        running = any(r.job.state == "running" for r in snapshot.jobs)
        self.timer.setInterval(POLL_RUNNING_MS if running else POLL_MS)
        self.refreshed.emit()

    def _conditions_text(self, text: str) -> str:
        if self.background is not None and self.background.error:
            text += f" · idle-time work stopped: {self.background.error}"
        elif self.background is not None and not self.background.running:
            text += " · idle-time work is off"
        return text

    def _announce_finished(self, rows: Sequence[JobRow]) -> None:
        for row in rows:
            if row.job.id in self._watching and row.job.state in ("done", "failed", "cancelled", "paused"):
                self._watching.discard(row.job.id)
                self.message.setText(f"job #{row.job.id} {row.job.state}")
                self.job_finished.emit(row.job)

    def _fill_jobs(self, rows: Sequence[JobRow]) -> None:
        keep = self.selected_job_id()
        self.jobs_model.set_rows(rows)
        row = self.jobs_model.row_of(keep)
        if row is not None:
            self.jobs.selectRow(row)
        self.jobs_empty.setVisible(not rows)
        self.jobs.setVisible(bool(rows))

    def _fill_adapters(self, adapters: Sequence[versions.Adapter]) -> None:
        keep = self.selected_adapter_id()
        self.adapters.setRowCount(len(adapters))
        active = next((a for a in adapters if a.active), None)
        for r, adapter in enumerate(adapters):
            probes, general = adapter_scores(adapter)
            notes = ", ".join(n for n, on in (("active", adapter.active),
                                               (f"stale: {adapter.stale_reason}", adapter.is_stale)) if on)
            for c, value in enumerate((adapter.name, adapter.status, probes, general, when(adapter.created_at),
                                       notes)):
                item = QTableWidgetItem(value)
                item.setData(ID_ROLE, adapter.id)
                if adapter.active:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.adapters.setItem(r, c, item)
            if adapter.id == keep:
                self.adapters.selectRow(r)
        text = f"In use: {active.name}" if active else "In use: the base model"
        if active is not None and active.is_stale:  # lineage: it learned from something the user changed
            text += f" — it learned from something you changed ({active.stale_reason}); roll back to stop using it"
        self.active_label.setText(text)

    def _colour_loss(self) -> None:
        self.loss_curve.setPen({"color": accent(0), "width": 2})
        self.loss_curve.setSymbolBrush(accent(0))

    def _draw_loss(self, rows: Sequence[JobRow]) -> None:
        for row in rows:
            self.losses.observe(row.job)
        job_id = self.losses.latest_job()
        if job_id is None:
            return
        steps, values = self.losses.curve(job_id)
        self.loss_curve.setData(steps, values)
        self.loss_plot.setVisible(True)
        self.loss_empty.setVisible(False)
        self.loss_title.setText(f"Fine-tune #{job_id}: loss {values[-1]:.3f} at step {steps[-1]}")

    def selected_job_id(self) -> Optional[int]:
        rows = self.jobs.selectionModel().selectedRows()
        return self.jobs_model.rows[rows[0].row()].job.id if rows else None

    def selected_adapter_id(self) -> Optional[int]:
        items = self.adapters.selectedItems()
        return items[0].data(ID_ROLE) if items else None

    def _selected_job(self) -> Any:
        job_id = self.selected_job_id()
        rows = self.snapshot.jobs if self.snapshot else []
        return next((r.job for r in rows if r.job.id == job_id), None)

    def _update_buttons(self) -> None:
        job = self._selected_job()
        self.start_button.setEnabled(job is not None and job.state in ("queued", "paused"))
        self.pause_button.setEnabled(job is not None and job.state in ("queued", "running"))
        self.cancel_button.setEnabled(job is not None and job.is_open)
        adapter_id = self.selected_adapter_id()
        adapters = self.snapshot.adapters if self.snapshot else []
        adapter = next((a for a in adapters if a.id == adapter_id), None)
        self.activate_button.setEnabled(adapter is not None and not adapter.active
                                        and adapter.status in ("accepted", "rejected", "candidate"))

    # --- actions ----------------------------------------------------------------------------------------
    def run_now(self, kind: str, told: Callable[[str], None] | None = None) -> None:
        """Queue a job of this kind as run-now and start it; the message says it started, or truthfully what it
        waits for (the chat's learning hands the model over to it; a reply being written does not)."""
        if not kind:
            return

        def work(db: Any) -> tuple[Any, Optional[str]]:
            job = store.enqueue(db, kind, run_now=True)
            scheduler = self._scheduler_on_lane()
            return job, scheduler.waiting_reason(job)

        def started(result: tuple[Any, Optional[str]]) -> None:
            job, waiting = result
            words = started_words(kind, waiting)
            self.message.setText(words)
            if told is not None:
                told(words)
            self._start(job)
        self._write(work, "", then=started)

    def finetune_tonight(self) -> None:
        quiet = self.services.settings.scheduler
        self._write(lambda db: store.enqueue(db, FINETUNE),
                    f"Fine-tune queued for {quiet.quiet_hours_start}–{quiet.quiet_hours_end}")

    def on_start(self) -> None:
        job = self._selected_job()
        if job is not None:
            self._write(lambda db: store.request(db, job.id, "resume"), f"job #{job.id} started", then=self._start)

    def on_pause(self) -> None:
        self._request("pause")

    def on_cancel(self) -> None:
        self._request("cancel")

    def _request(self, action: str) -> None:
        job = self._selected_job()
        if job is not None:
            self._write(lambda db: store.request(db, job.id, action), f"job #{job.id}: {action} asked")

    def _start(self, job: Any) -> None:
        self._watching.add(job.id)
        if self.background is not None and self.background.running:
            return  # the background loop runs run-now jobs first; the next polls show it
        self.host.run(job.id, on_finished=lambda final: self.runner.post(self._finished, job.id, final))

    def _finished(self, job_id: int, final: Any) -> None:
        if final is None:  # another runner (the background loop, a CLI) took it: the polls follow it there
            self.message.setText(f"job #{job_id} is running elsewhere")
        self.refresh()

    def on_activate(self) -> None:
        adapter_id = self.selected_adapter_id()
        if adapter_id is not None:
            self._write(lambda db: versions.activate(db, adapter_id), "adapter activated; chat uses it next turn")

    def on_rollback(self) -> None:
        self._write(lambda db: versions.rollback_to_base(db), "back to the base model; every adapter is kept")

    def _write(self, work: Callable[[Any], Any], done_text: str, then: Callable[[Any], None] | None = None) -> None:
        """work(db) on the database lane, then a message, `then(result)` and a fresh read."""
        def finished(result: Any) -> None:
            if done_text:
                self.message.setText(done_text)
            if then is not None:
                then(result)
            self.refresh()  # the lane is serial: this read sees the write
        self.runner.submit("db", lambda: work(self.services.db), on_done=finished, on_error=self._failed)

    def _failed(self, exc: BaseException) -> None:
        self._busy = False
        self.message.setText(f"Could not do that: {exc}")

    def shutdown(self) -> None:
        self.timer.stop()
        self.host.shutdown()
