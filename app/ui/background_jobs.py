"""The app's idle-time learning: while the window is open, the real scheduler queues what is due (reflection
after a session, the daily consolidation, forgetting and fine-tune) and runs whatever may run now.

It runs on its own thread with its own connection to the store. The user's input anywhere in the app
(a key press, a click, a scroll) counts as activity, so work waits until they have been away for the
configured minutes, and a running job yields at its next checkpoint when they come back. `model_gate` is
the gate a chat turn holds, so model-using jobs give way to chat.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from PySide6.QtCore import QEvent, QObject

from core.conditions import ActivityTracker, ModelGate
from core.scheduler import Environment, Scheduler
from core.store.db import Database, open_db

ACTIVITY_EVENTS = (QEvent.Type.KeyPress, QEvent.Type.MouseButtonPress, QEvent.Type.Wheel)
STOP_TIMEOUT = 60.0  # a fine-tune checkpoints before it stops; this bounds the wait at quit


class ActivityFilter(QObject):
    """Installed on the QApplication: every key press, click or scroll touches the tracker."""

    def __init__(self, tracker: ActivityTracker) -> None:
        super().__init__()
        self.tracker = tracker

    def eventFilter(self, _watched: QObject, event: QEvent) -> bool:
        if event.type() in ACTIVITY_EVENTS:
            self.tracker.touch()
        return False  # only watching: the event goes on as usual


class BackgroundJobs:
    def __init__(self, services: Any, *, poll_seconds: float = 2.0,
                 environment: Optional[Callable[[Database, ActivityTracker, ModelGate], Environment]] = None) -> None:
        self.services = services
        self.activity = ActivityTracker()
        self.model_gate = ModelGate()
        self.poll_seconds = poll_seconds
        self.error: Optional[str] = None  # why the loop stopped on its own, for the Jobs panel
        self._environment = environment  # tests inject idle and power; the app uses the real probes
        self._scheduler: Optional[Scheduler] = None
        self._thread: Optional[threading.Thread] = None
        self._filter: Optional[ActivityFilter] = None
        self._app: Optional[QObject] = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, app: Optional[QObject] = None) -> "BackgroundJobs":
        """Start the loop; with the QApplication given, the user's input there counts as activity."""
        if app is not None:
            self._app, self._filter = app, ActivityFilter(self.activity)
            app.installEventFilter(self._filter)
        self._thread = threading.Thread(target=self._run, name="engram-background", daemon=True)
        self._thread.start()
        return self

    def scheduler_options(self, db: Database) -> dict[str, Any]:
        """What a scheduler on `db` needs to see the same activity, power and chat state as this loop (the
        Jobs panel's view of the conditions uses it too)."""
        if self._environment is not None:
            return {"env": self._environment(db, self.activity, self.model_gate)}
        return {"activity": self.activity, "model_gate": self.model_gate}

    def _run(self) -> None:
        from app.services.scheduling import plan
        main = self.services.db  # opened (and migrated) through the services first
        db = open_db(main.path, clock=main.clock)  # one connection per thread; WAL lets both write
        try:
            scheduler = self._scheduler = self.services.scheduler(db=db, **self.scheduler_options(db))
            scheduler.run_forever(poll_seconds=self.poll_seconds, tick=lambda: plan(scheduler, self.services.settings))
        except Exception as exc:  # the app goes on without idle-time learning; the Jobs panel says why
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            db.close()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Ask the running job to checkpoint and the loop to end, and wait for it (app quit)."""
        if self._app is not None and self._filter is not None:
            self._app.removeEventFilter(self._filter)
        thread = self._thread
        if thread is None:
            return
        waited = 0.0
        while thread.is_alive() and waited < timeout:
            if self._scheduler is not None:
                self._scheduler.stop()  # repeated: run_forever clears the flag once when it starts
            thread.join(0.2)
            waited += 0.2
