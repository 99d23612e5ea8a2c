"""`engram chat` learns from each stored turn on a thread of its own, after the reply and never in its way.

The rule (issue 17, time on a weak machine): a turn's learning starts only while no reply is being made. A reply
that starts meanwhile makes learning give way at its next step (core.assistant.Assistant.learn's `busy`): a turn
not begun waits in the queue and is learned once that reply ends; one being learned finishes its facts and skips
its usefulness rating. What was learned is printed before the next prompt ("[from 'I play…': learned 1 fact]").
At the end of the chat the turns still waiting are learned, with a line saying so; Ctrl-C there leaves them
stored as waiting to be learned (core.assistant.pending_learning), and `engram reflect` learns them. A turn whose
learning raised says whether Engram tries it again later or has stopped trying (`engram relearn` then tries again).

The thread has its own connection to the store (SQLite wants one per thread); its model calls go through the
chat engine's one MLX thread, like the replies'.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable

from core.assistant import BUSY
from core.words import counted


class BackgroundLearner:
    def __init__(self, make_assistant: Callable[[], Any]) -> None:
        self._make_assistant = make_assistant  # called on the thread: it opens that thread's connection
        self._queue: deque[Any] = deque()
        self._notes: list[str] = []
        self._lock = threading.Condition()
        self._replying = threading.Event()
        self._stopping = threading.Event()  # Ctrl-C at the end: what waits stays for `engram reflect`
        self._closing = False
        self._working = False
        self._thread = threading.Thread(target=self._run, name="engram-learning", daemon=True)
        self._thread.start()

    def reply_started(self) -> None:
        self._replying.set()

    def reply_ended(self) -> None:
        with self._lock:
            self._replying.clear()
            self._lock.notify_all()

    def add(self, record: Any) -> None:
        """A stored turn to learn from once no reply is being made."""
        with self._lock:
            self._queue.append(record)
            self._lock.notify_all()

    def take_notes(self) -> list[str]:
        with self._lock:
            notes, self._notes = self._notes, []
        return notes

    @property
    def waiting(self) -> int:
        """Turns not learned from yet, the one being learned included."""
        with self._lock:
            return len(self._queue) + int(self._working)

    def close(self, *, learn_the_rest: bool = True) -> None:
        """Stop the thread; first learn what waits, unless told not to (or Ctrl-C comes while it does)."""
        if not learn_the_rest:
            self._stopping.set()
        with self._lock:
            self._closing = True
            self._replying.clear()
            self._lock.notify_all()
        try:
            while self._thread.is_alive():
                self._thread.join(0.2)  # a join with a timeout lets Ctrl-C through
        except KeyboardInterrupt:
            self._stopping.set()
            self._thread.join()  # the model call under way ends; nothing after it starts

    def _busy(self) -> bool:
        return self._replying.is_set() or self._stopping.is_set()

    def _next(self) -> Any:
        with self._lock:
            while not self._stopping.is_set() and (self._replying.is_set() or not self._queue):
                if self._closing and not self._queue:
                    return None
                self._lock.wait()
            if self._stopping.is_set():
                return None
            self._working = True
            return self._queue.popleft()

    def _run(self) -> None:
        try:
            assistant = self._make_assistant()
        except Exception as exc:  # noqa: BLE001 - the store would not open: the chat goes on without learning
            with self._lock:
                self._notes.append(f"  [nothing is learned in this chat: {exc}]")
                self._stopping.set()
            return
        try:
            while (record := self._next()) is not None:
                try:
                    report = assistant.learn(record, busy=self._busy)
                except Exception as exc:  # noqa: BLE001 - the store or the model failed: said, and the chat goes on
                    self._note(record, _failure_words(assistant.db, record.episode_id, exc))
                    continue
                finally:
                    with self._lock:
                        self._working = False
                if report.skipped == BUSY:
                    with self._lock:
                        self._queue.appendleft(record)  # a reply came first: learned once it ends
                    continue
                self._note(record, learned_words(report))
        finally:
            assistant.db.close()

    def _note(self, record: Any, words: str) -> None:
        if words:
            with self._lock:
                self._notes.append(f"  [from {_short(record.user_text, 30)!r}: {words}]")


def _failure_words(db: Any, episode_id: int | None, exc: Exception) -> str:
    """Whether Engram tries this turn again later or has stopped trying (and how to ask for another go)."""
    from app.cli.learning import not_learned
    if episode_id is None:
        return f"could not learn from this: {exc}"
    try:
        return not_learned(db, episode_id, exc)
    except Exception:  # noqa: BLE001 - the store cannot even say: the failure itself is still worth a line
        return f"could not learn from this: {exc}"


def learned_words(report: Any) -> str:
    """What one turn taught, in a few words ('' when nothing worth a line)."""
    notes = []
    if report.facts:
        notes.append(f"learned {counted(len(report.facts), 'fact')}")
    if report.errors:
        notes.append("could not learn from this: " + _short(report.errors[0]))
    return " | ".join(notes)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
