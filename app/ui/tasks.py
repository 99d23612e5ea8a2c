"""Background work for the GUI: one serial database lane, one model lane, results back on the GUI thread.

SQLite likes one writer and MLX wants one owning thread, so each lane is a single worker thread.
Background code never touches a widget: callbacks are delivered on the GUI thread through one signal.
"""
from __future__ import annotations

import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from PySide6.QtCore import QObject, Signal, Slot

from core.errors import EngramError

# io: downloads, which must never hold up the store or the model; bulk: store-wide work on a connection of its own
# (re-embedding every row after the embedding model changes), which must hold up neither
LANES = ("db", "model", "io", "bulk")


@dataclass
class _Delivery:
    callback: Callable[..., Any] | None
    args: tuple


def in_words(exc: BaseException) -> BaseException:
    """A failure of the machine (a damaged or busy store, a full disk, a permission) as an EngramError whose text
    a panel can show as it is; Engram's own errors, and anything a handler may test for, pass unchanged."""
    import apsw
    if isinstance(exc, EngramError) or not isinstance(exc, (apsw.Error, OSError, RecursionError, UnicodeError,
                                                            MemoryError, OverflowError)):
        return exc
    from app.services.errors import describe
    worded = EngramError(describe(exc)[0])
    worded.__cause__ = exc
    return worded


class TaskRunner(QObject):
    _deliver = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lanes = {lane: ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"engram-{lane}")
                       for lane in LANES}
        self._deliver.connect(self._on_deliver)
        self.errors: list[str] = []  # the last errors, for the status bar and tests

    def submit(self, lane: str, fn: Callable[..., Any], *args: Any,
               on_done: Callable[[Any], None] | None = None,
               on_error: Callable[[BaseException], None] | None = None) -> Future:
        """Run fn(*args) on `lane`; on_done(result) or on_error(exc) is called on the GUI thread."""
        def work() -> Any:
            try:
                result = fn(*args)
            except BaseException as exc:  # delivered to the GUI, never lost in a thread
                self._fail(exc, on_error)
                raise
            self._deliver.emit(_Delivery(on_done, (result,)))
            return result
        return self._submitted(lane, work)

    def _submitted(self, lane: str, work: Callable[[], Any]) -> Future:
        """The lane's future; after shutdown (the window closing) a late click or reload is dropped, not raised
        into the event loop: its future is returned cancelled."""
        try:
            return self._lanes[lane].submit(work)
        except RuntimeError:  # "cannot schedule new futures after shutdown"
            dropped: Future = Future()
            dropped.cancel()
            return dropped

    def stream(self, lane: str, produce: Callable[[], Iterable[Any]], *,
               on_item: Callable[[Any], None], on_done: Callable[[], None] | None = None,
               on_error: Callable[[BaseException], None] | None = None) -> Future:
        """Iterate produce() on `lane`, handing each item to on_item on the GUI thread."""
        def work() -> None:
            try:
                for item in produce():
                    self._deliver.emit(_Delivery(on_item, (item,)))
            except BaseException as exc:
                self._fail(exc, on_error)
                return
            self._deliver.emit(_Delivery(on_done, ()))
        return self._submitted(lane, work)

    def post(self, callback: Callable[..., None], *args: Any) -> None:
        """Call callback(*args) on the GUI thread; safe from any thread (progress callbacks use it)."""
        self._deliver.emit(_Delivery(callback, args))

    def shutdown(self, wait: bool = True) -> None:
        for executor in self._lanes.values():
            executor.shutdown(wait=wait, cancel_futures=True)

    def _fail(self, exc: BaseException, on_error: Callable[[BaseException], None] | None) -> None:
        # The failed call's locals (an open cursor, say) are dropped here, on their lane: the exception goes on to
        # the GUI thread, and a cursor finalized there while this lane holds the connection deadlocks (apsw takes
        # the connection's mutex with the GIL held).
        traceback.clear_frames(exc.__traceback__)
        self.errors = (self.errors + ["".join(traceback.format_exception_only(type(exc), exc)).strip()])[-20:]
        self._deliver.emit(_Delivery(on_error, (in_words(exc),)))

    @Slot(object)
    def _on_deliver(self, delivery: _Delivery) -> None:
        if delivery.callback is not None:
            delivery.callback(*delivery.args)
