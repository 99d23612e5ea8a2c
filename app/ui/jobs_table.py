"""The queue table behind the Jobs panel: one row per job, replaced in one reset per poll (cheap at hundreds of
rows, where refilling a QTableWidget cell by cell re-measures the columns after every cell)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

from app.ui.jobs_state import JobRow
from app.ui.panel_widgets import BAR_ROLE, duration, when

COLUMNS = ("Job", "State", "Progress", "ETA", "Status", "Started")
ID_ROLE = Qt.ItemDataRole.UserRole + 1


def job_status_text(row: JobRow) -> str:
    job = row.job
    parts = [job.message] if job.message else []
    if row.waiting:
        parts.append(f"waiting: {row.waiting}")
    elif job.state == "queued":
        parts.append("ready")
    if job.requested:
        parts.append(f"{job.requested} requested")
    if job.last_error and job.state != "done":
        parts.append(f"last error: {job.last_error}")
    return " · ".join(parts)


def row_texts(row: JobRow) -> tuple[str, ...]:
    job = row.job
    return (f"#{job.id} {job.kind}" + (" (run now)" if job.run_now else ""), job.state, f"{job.progress:.0%}",
            duration(row.eta_seconds), job_status_text(row), when(job.started_at))


class JobsTableModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[JobRow] = []
        self._texts: list[tuple[str, ...]] = []

    def set_rows(self, rows: Sequence[JobRow]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self._texts = [row_texts(r) for r in self.rows]
        self.endResetModel()

    def text(self, row: int, column: int) -> str:
        return self._texts[row][column]

    def row_of(self, job_id: Optional[int]) -> Optional[int]:
        return next((n for n, r in enumerate(self.rows) if r.job.id == job_id), None)

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row, column = index.row(), index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self._texts[row][column]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._texts[row][4] or None
        if role == BAR_ROLE and column == 2:
            return self.rows[row].job.progress
        if role == ID_ROLE:
            return self.rows[row].job.id
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None
