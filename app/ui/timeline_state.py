"""What the Forgetting timeline shows, read off the GUI thread: the forgetting curves of the items closest to
being forgotten, what is coming up, and what was forgotten (with why and the score), all from core.memory.forget.
Each curve is drawn with the weights the pass applies to that item: learnt from this user, with its preference.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Sequence

import numpy as np

from core.config import Settings
from core.memory import forget, learned, retention
from core.store.episodes import get_episodes
from core.store.memories import get_memories
from core.words import counted

LABEL_CHARS = 90


@dataclass(frozen=True)
class Curve:
    """One item's projected retention over the coming days."""
    item_type: str  # memory / episode
    item_id: int
    label: str
    retention: float  # now
    values: list[float]  # on each day of TimelineView.days
    days_left: Optional[float]  # until it falls below the threshold (None: not within the horizon)

    @property
    def key(self) -> str:
        return f"{self.item_type}:{self.item_id}"


@dataclass(frozen=True)
class PastEvent:
    event: forget.ForgettingEvent
    label: str

    @property
    def restorable(self) -> bool:
        return self.event.restored_at is None and self.label != PURGED


@dataclass(frozen=True)
class TimelineView:
    days: list[float]
    threshold: float
    curves: list[Curve]
    past: list[PastEvent]
    due_now: int = 0  # items a forgetting pass would take if it ran now (all of them, not only those drawn)
    too_young: retention.TooYoung = retention.TooYoung(0, None)  # not drawn: too new to be forgotten yet

    @property
    def upcoming(self) -> list[Curve]:
        """Items that fall below the threshold within the horizon, soonest first."""
        return sorted((c for c in self.curves if c.days_left is not None), key=lambda c: (c.days_left, c.retention))


PURGED = "(purged)"
EMPTY = ("Nothing is old enough to be forgotten yet. Memories unused for a while fade; pinned, protected and critical "
         "ones never do.")


def empty_text(view: TimelineView, min_age_days: float) -> str:
    """What the plot says when it has no curve: in a user's first days, when forgetting can begin (nothing younger
    than min_age_days is ever forgotten, so nothing is drawn)."""
    young = view.too_young
    if young.count == 0 or young.first_at is None:
        return EMPTY
    day = time.localtime(young.first_at)
    return (f"Nothing is old enough to be forgotten yet: Engram never forgets anything younger than "
            f"{min_age_days:g} days. {counted(young.count, 'memory or turn', 'memories and turns')} will be weighed "
            f"from {day.tm_mday} {time.strftime('%B', day)}; pinned, protected and critical ones never are.")


def read_timeline(db: Any, settings: Settings, *, horizon_days: int = 90, limit: int = 40) -> TimelineView:
    """Everything the timeline draws, in one read on the database lane."""
    step = max(1, horizon_days // 45)
    days = [float(d) for d in range(0, horizon_days + 1, step)]
    tables = forget.score_store(db, settings)  # scored once: the curves and the count due now both use it
    threshold = forget.threshold(settings)
    due_now = sum(int(np.count_nonzero(t.retention < threshold)) for t in tables.values())
    lowest = sorted((t.row(int(n)) for t in tables.values() for n in np.argsort(t.retention)[:limit]),
                    key=lambda s: s.retention)[:limit]
    weights = _item_weights(db, settings)
    curves = [(s, forget.project(s, weights(s), days)) for s in lowest]
    events = forget.list_events(db, limit=200)
    labels = item_labels(db, [(s.item_type, s.item_id) for s, _ in curves] +
                         [(e.item_type, e.item_id) for e in events])
    drawn = [Curve(s.item_type, s.item_id, labels.get((s.item_type, s.item_id), PURGED), s.retention, values,
                   forget.days_until_forgotten(s, weights(s), horizon_days)) for s, values in curves]
    past = [PastEvent(e, labels.get((e.item_type, e.item_id), PURGED)) for e in events]
    return TimelineView(days, threshold, drawn, past, due_now, retention.too_young(db, settings))


def _item_weights(db: Any, settings: Settings) -> Callable[[forget.Scored], Settings]:
    """The weights a forgetting pass applies to one item: those learnt from this user (when forgetting learns),
    with the item's δ·preference folded into the bias — its content does not change as the days pass, so on its
    curve the term is a constant offset, and forget.project draws it as the pass scores it."""
    effective = learned.effective(db, settings)
    delta = retention.content_weight(db, settings)

    def weights(scored: forget.Scored) -> Settings:
        offset = delta * scored.preference
        if offset == 0.0:
            return effective
        return replace(effective, forgetting=replace(effective.forgetting, bias=effective.forgetting.bias + offset))
    return weights


def item_labels(db: Any, items: Sequence[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """A short text per item: a memory's statement, or what the user said in an episode."""
    memory_ids = sorted({i for t, i in items if t == "memory"})
    episode_ids = sorted({i for t, i in items if t == "episode"})
    labels = {("memory", i): _short(m.statement) for i, m in get_memories(db, memory_ids).items()}
    labels.update({("episode", i): _short(e.user_text) for i, e in get_episodes(db, episode_ids).items()})
    return labels


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


def days_text(days_left: Optional[float]) -> str:
    if days_left is None:
        return "not within the horizon"
    if days_left <= 0:
        return "at the next forgetting pass"
    if days_left < 1:
        return "within a day"  # not "in 0 days"
    return f"in {counted(int(days_left), 'day')}"  # the whole days shown decide the noun: 1.5 is "in 1 day"
