"""What the scheduler waits for: the user away, the Mac on power, the quiet hours, the model free of chat.

Everything here takes its time source and probes as arguments, so tests drive it with a fake clock.
Platform probes (IOKit idle time, pmset) live in app/services/platform.py and are passed in as callables.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

Clock = Callable[[], float]
IdleProbe = Callable[[], Optional[float]]  # seconds since the last input, None when unknown
PowerProbe = Callable[[], Optional[bool]]  # True on AC, False on battery, None when unknown


class ActivityTracker:
    """The app's own input activity: the GUI calls touch() on every key press, click or chat turn."""

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()

    def touch(self) -> None:
        with self._lock:
            self._last = self._clock()

    def idle_seconds(self) -> float:
        with self._lock:
            return max(0.0, self._clock() - self._last)


def combined_idle(*probes: IdleProbe) -> Callable[[], float]:
    """The user is as idle as the most recent input anywhere: the minimum of the known probes."""
    def idle_seconds() -> float:
        known = [v for v in (p() for p in probes) if v is not None]
        return min(known) if known else 0.0
    return idle_seconds


@dataclass
class CachedProbe:
    """Runs a slow probe (a subprocess) at most once per `ttl` seconds."""

    probe: Callable[[], object]
    ttl: float
    clock: Clock = time.monotonic
    _at: float | None = field(default=None, init=False)
    _value: object = field(default=None, init=False)

    def __call__(self):
        now = self.clock()
        if self._at is None or now - self._at >= self.ttl:
            self._value = self.probe()
            self._at = now
        return self._value


def parse_hhmm(text: str) -> int:
    """'01:30' -> minutes after midnight; a malformed value raises ValueError."""
    hours, _, minutes = text.strip().partition(":")
    h, m = int(hours), int(minutes or 0)
    if not (0 <= h <= 24 and 0 <= m < 60) or h * 60 + m > 24 * 60:
        raise ValueError(f"not a time of day: {text!r}")
    return h * 60 + m


def in_quiet_hours(local: time.struct_time, start: str, end: str) -> bool:
    """True inside [start, end) local time; a window that crosses midnight (23:00–06:00) wraps."""
    minute = local.tm_hour * 60 + local.tm_min
    a, b = parse_hhmm(start), parse_hhmm(end)
    if a == b:
        return False
    return a <= minute < b if a < b else (minute >= a or minute < b)


REPLYING = "replying"  # the chat answers a message
LEARNING = "learning"  # the chat learns from a turn it has answered


class ModelGate:
    """Chat always has the model first: the chat engine marks its turns, and model-using jobs wait or yield.

    It also knows what the chat is doing with the model, so the Jobs panel can say why a job waits."""

    def __init__(self) -> None:
        self._turns = {REPLYING: 0, LEARNING: 0}
        self._wanted: set[int] = set()  # jobs the user started (Run now) that the chat's learning gives way to
        self._lock = threading.Lock()

    def want(self, job_id: int) -> None:
        """A job the user started now waits for the chat's learning: learning gives way at its next token (the
        job learns the waiting turns first, resuming where the chat stopped)."""
        with self._lock:
            self._wanted.add(int(job_id))

    def unwant(self, job_id: int) -> None:
        with self._lock:
            self._wanted.discard(int(job_id))

    def learning_gives_way(self) -> bool:
        """A job the user started wants the model: the chat does not start or go on learning meanwhile."""
        with self._lock:
            return bool(self._wanted)

    def chat_started(self, activity: str = REPLYING) -> None:
        with self._lock:
            self._turns[activity] += 1

    def chat_finished(self, activity: str = REPLYING) -> None:
        with self._lock:
            self._turns[activity] = max(0, self._turns[activity] - 1)

    def chat_active(self) -> bool:
        return self.busy_with() is not None

    def busy_with(self) -> Optional[str]:
        """REPLYING, LEARNING or None; a reply outranks learning (learning gives way to it)."""
        with self._lock:
            return next((activity for activity in (REPLYING, LEARNING) if self._turns[activity]), None)

    def chat_turn(self) -> "_ChatTurn":
        return _ChatTurn(self)


def chat_reason(activity: Optional[str]) -> str:
    """Why a model-using job waits, in the words the Jobs panel shows."""
    return "learning from your messages" if activity == LEARNING else "chat is using the model"


class _ChatTurn:
    def __init__(self, gate: ModelGate) -> None:
        self._gate = gate

    def __enter__(self) -> ModelGate:
        self._gate.chat_started()
        return self._gate

    def __exit__(self, *exc: object) -> None:
        self._gate.chat_finished()
