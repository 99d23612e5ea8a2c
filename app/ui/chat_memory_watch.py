"""One look at whether another process changed the store, shared by the window (StoreWatch), and what the chat
does with it (MemoryWatch).

MemoryWatch keeps what the chat shows about memories (the chips under a reply, its "Remembered: …" rows) in step with
the store: a memory edited or deleted elsewhere — the Memories panel, or `engram memory …` while the app is open —
shows its new words, or that it is in the trash (Restore still brings it back).

Changes made in this app arrive as the window's memories_changed. A change made by another process (or by an
idle-time job's own connection) is noticed by SQLite's `PRAGMA data_version`, which moves when another connection
commits: StoreWatch asks it once every few seconds on the db lane, for the whole window, and says `moved`; the chat,
the Memories panel and the memory graph each re-read what they show only then (a hidden panel when it is next
shown). Every read runs on the db lane, never on the GUI thread.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from PySide6.QtCore import QObject, QTimer, Signal

from core.store.memories import get_memories

POLL_MS = 3000  # how often to ask whether another process changed the store


@dataclass(frozen=True)
class ShownMemory:
    """A memory as the chat shows it: its words now, and whether it is in the trash."""
    statement: str
    deleted: bool


def read_shown(db: Any, ids: Sequence[int]) -> dict[int, ShownMemory]:
    """The memories' current state; a memory purged for good is left out."""
    found = get_memories(db, list(ids))
    return {int(i): ShownMemory(m.statement, m.deleted_at is not None) for i, m in found.items()}


class StoreWatch(QObject):
    """`moved` when another connection committed to the store since the last look (one query every POLL_MS)."""
    moved = Signal()

    def __init__(self, services: Any, runner: Any, parent: Optional[QObject] = None) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.version: Optional[int] = None  # the store's data_version when last looked at
        self._closed = False
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self.poll)

    def start(self) -> None:
        if self._closed or self.timer.isActive():
            return
        self.poll()  # the version to compare with: a change made before a panel shows a memory is seen too
        self.timer.start()

    def stop(self) -> None:
        self._closed = True
        self.timer.stop()

    def poll(self) -> None:
        if self._closed:
            return
        try:
            self.runner.submit("db", lambda: int(self.services.db.scalar("PRAGMA data_version")), on_done=self._seen,
                               on_error=lambda _exc: None)  # the next look tries again
        except RuntimeError:  # the lanes are shut down: the window is closing
            self.stop()

    def _seen(self, version: int) -> None:
        moved = self.version is not None and version != self.version
        self.version = version
        if moved and not self._closed:
            self.moved.emit()


class MemoryWatch(QObject):
    """The chat's memory rows and chips re-read when the store changed (here: `changed`; elsewhere: the window's
    StoreWatch, or one of its own for a chat without a window that has one)."""

    def __init__(self, services: Any, runner: Any, replies: Callable[[], Sequence[Any]], changed: Any = None,
                 parent: Optional[QObject] = None, store: Optional[StoreWatch] = None) -> None:
        super().__init__(parent)
        self.services = services
        self.runner = runner
        self.replies = replies  # the reply widgets on screen now
        self._closed = False
        self._own_store = store is None
        self.store = store if store is not None else StoreWatch(services, runner, self)
        self.store.moved.connect(self.refresh)
        if changed is not None:
            changed.connect(self.refresh)

    def start(self) -> None:
        self.store.start()  # the window's is started already: this does nothing then

    def stop(self) -> None:
        self._closed = True
        if self._own_store:
            self.store.stop()

    def shown_ids(self) -> list[int]:
        ids: list[int] = []
        for reply in self.replies():
            ids += [row.memory_id for row in reply.learned_rows()] + [chip.memory_id for chip in reply.chip_widgets()]
        return list(dict.fromkeys(ids))

    def refresh(self) -> None:
        """Re-read every memory the chat shows and redraw the rows and chips that changed."""
        ids = self.shown_ids()
        if self._closed or not ids:
            return
        self._submit(lambda: read_shown(self.services.db, ids), lambda found: self._show(ids, found))

    def _show(self, ids: Sequence[int], found: dict[int, ShownMemory]) -> None:
        if self._closed:
            return
        for reply in self.replies():
            for shown in reply.learned_rows() + reply.chip_widgets():
                if shown.memory_id in ids:
                    shown.show_memory(found.get(shown.memory_id))

    def _submit(self, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        try:
            self.runner.submit("db", work, on_done=done, on_error=lambda _exc: None)  # next change tries again
        except RuntimeError:  # the lanes are shut down: the window is closing
            self.stop()
