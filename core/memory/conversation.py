"""A conversation as the chat panel shows it: its turns in order, each with the memories its reply used.

Read-only; the attribution comes from reply_memories (migration 3), minus the memories the user vetoed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from core.store.db import Database
from core.store.episodes import list_episodes
from core.store.sessions import get_session
from core.types import Session

MAX_TURNS = 500  # the newest turns of a very long conversation; older ones stay searchable in Memories


@dataclass(frozen=True)
class UsedMemory:
    id: int
    text: str
    why: str = ""
    drew_on: bool | None = None  # the reply drew on it (core.memory.attribution); None: stored before Engram knew


@dataclass(frozen=True)
class ConversationTurn:
    episode_id: int
    user_text: str
    assistant_text: str
    rating: int | None = None
    used: tuple[UsedMemory, ...] = ()


@dataclass(frozen=True)
class Conversation:
    session: Session
    turns: list[ConversationTurn] = field(default_factory=list)


def load_conversation(db: Database, session_id: int, *, limit: int = MAX_TURNS) -> Conversation:
    session = get_session(db, session_id)
    episodes = list(reversed(list_episodes(db, session_id=session_id, limit=limit)))
    used = used_memories(db, [e.id for e in episodes])
    turns = [ConversationTurn(e.id, e.user_text, e.assistant_text, e.rating, tuple(used.get(e.id, ())))
             for e in episodes]
    return Conversation(session, turns)


def used_memories(db: Database, episode_ids: Sequence[int]) -> dict[int, list[UsedMemory]]:
    """For each reply, the memories in its context that the user did not veto, in context order."""
    found: dict[int, list[UsedMemory]] = {}
    ids = [int(i) for i in episode_ids]
    for start in range(0, len(ids), 500):  # stay far below SQLite's bound-parameter limit
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        rows = db.query("SELECT r.episode_id, r.memory_id, r.critical, r.drew_on, m.statement FROM reply_memories r "
                        f"JOIN memories m ON m.id = r.memory_id WHERE r.episode_id IN ({marks}) "
                        "AND r.vetoed_at IS NULL AND m.deleted_at IS NULL ORDER BY r.episode_id, r.rank", chunk)
        for row in rows:
            why = "critical for this kind of request" if row["critical"] else "recalled as relevant"
            drew_on = None if row["drew_on"] is None else bool(row["drew_on"])
            found.setdefault(row["episode_id"], []).append(UsedMemory(row["memory_id"], row["statement"], why,
                                                                      drew_on))
    return found
