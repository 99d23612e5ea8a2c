"""A conversation as the chat panel shows it: its turns in order, each with the memories its reply used and the
earlier turns it quoted.

Read-only; the attribution comes from reply_memories (migration 3), minus the memories the user vetoed, and from
reply_turns (migration 10), minus the turns in the trash.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

from core.store import branches
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
class EarlierTurn:
    """An earlier conversation turn a reply quoted in its context: where and when it was said, and why recalled."""
    episode_id: int
    session_id: int | None
    session_title: str
    at: float
    user_text: str
    why: str = ""
    drew_on: bool | None = None  # the reply drew on it; None while the reply is being written
    forgotten: bool = False  # compacted by forgetting since: not in its conversation until restored


@dataclass(frozen=True)
class TaughtFact:
    """A memory a turn taught (its first source is that turn): shown under its reply, with Undo, whenever the
    conversation is."""
    memory_id: int
    statement: str
    deleted: bool = False  # in the trash since (Undo, Delete): the row offers Restore
    replaces: str = ""  # the statement of the fact it closed


@dataclass(frozen=True)
class ConversationTurn:
    episode_id: int
    user_text: str
    assistant_text: str
    rating: int | None = None
    used: tuple[UsedMemory, ...] = ()
    earlier: tuple[EarlierTurn, ...] = ()
    taught: tuple[TaughtFact, ...] = ()
    finish_reason: str | None = None  # why the reply ended ("repetition": stopped going round in a loop)
    learning: str | None = None  # core.store.turn_learning's state: pending, done, failed, skipped
    earlier_replies: tuple[str, ...] = ()  # what it answered before Regenerate, oldest first
    version: tuple[int, int] = (1, 1)  # which version of an edited message this is, of how many (core.store.branches)


@dataclass(frozen=True)
class Conversation:
    session: Session
    turns: list[ConversationTurn] = field(default_factory=list)


def load_conversation(db: Database, session_id: int, *, limit: int = MAX_TURNS) -> Conversation:
    session = get_session(db, session_id)
    episodes = list(reversed(list_episodes(db, session_id=session_id, limit=limit, on_path=True)))
    versions = branches.version_counts(db, [e.id for e in episodes])
    used = used_memories(db, [e.id for e in episodes])
    earlier = quoted_turns(db, [e.id for e in episodes])
    taught = taught_facts(db, [e.id for e in episodes])
    turns = [ConversationTurn(e.id, e.user_text, e.assistant_text, e.rating, tuple(used.get(e.id, ())),
                              tuple(earlier.get(e.id, ())), tuple(taught.get(e.id, ())),
                              e.metadata.get("finish_reason"), e.metadata.get("learning"),
                              tuple(e.metadata.get("earlier_replies", ())), versions.get(e.id, (1, 1)))
             for e in episodes]
    return Conversation(session, turns)


def _chunks(ids: Sequence[int], size: int = 500) -> Iterator[tuple[list[int], str]]:
    """The ids in chunks, each with its placeholders: far below SQLite's bound-parameter limit."""
    ids = [int(i) for i in ids]
    for start in range(0, len(ids), size):
        chunk = ids[start:start + size]
        yield chunk, ",".join("?" * len(chunk))


def used_memories(db: Database, episode_ids: Sequence[int]) -> dict[int, list[UsedMemory]]:
    """For each reply, the memories in its context that the user did not veto, in context order."""
    found: dict[int, list[UsedMemory]] = {}
    for chunk, marks in _chunks(episode_ids):
        rows = db.query("SELECT r.episode_id, r.memory_id, r.critical, r.drew_on, m.statement FROM reply_memories r "
                        f"JOIN memories m ON m.id = r.memory_id WHERE r.episode_id IN ({marks}) "
                        "AND r.vetoed_at IS NULL AND m.deleted_at IS NULL ORDER BY r.episode_id, r.rank", chunk)
        for row in rows:
            why = "critical for this kind of request" if row["critical"] else "recalled as relevant"
            drew_on = None if row["drew_on"] is None else bool(row["drew_on"])
            found.setdefault(row["episode_id"], []).append(UsedMemory(row["memory_id"], row["statement"], why,
                                                                      drew_on))
    return found


def taught_facts(db: Database, episode_ids: Sequence[int]) -> dict[int, list[TaughtFact]]:
    """For each turn, the memories it taught first (not those it only said again), in the order written; purged
    and forgotten ones are gone from the list, trashed ones stay (restorable)."""
    found: dict[int, list[TaughtFact]] = {}
    for chunk, marks in _chunks(episode_ids):
        rows = db.query("SELECT s.episode_id, m.id, m.statement, m.deleted_at, (SELECT o.statement FROM memories o "
                        "WHERE o.superseded_by = m.id ORDER BY o.id LIMIT 1) AS replaces FROM memory_sources s "
                        f"JOIN memories m ON m.id = s.memory_id WHERE s.episode_id IN ({marks}) "
                        "AND m.kind != 'summary' AND m.forgotten_at IS NULL AND s.episode_id = (SELECT "
                        "min(f.episode_id) FROM memory_sources f WHERE f.memory_id = m.id) ORDER BY m.id", chunk)
        for row in rows:
            found.setdefault(row["episode_id"], []).append(
                TaughtFact(int(row["id"]), str(row["statement"]), row["deleted_at"] is not None,
                           str(row["replaces"] or "")))
    return found


# A hidden conversation (trash_session) keeps its turns, and recall may quote them, but it cannot be opened.
_EARLIER = "e.id, s.id AS session_id, coalesce(s.title, '') AS title, e.created_at, e.user_text, e.forgotten_at"
_ITS_SESSION = "LEFT JOIN sessions s ON s.id = e.session_id AND s.deleted_at IS NULL"


def quoted_turns(db: Database, episode_ids: Sequence[int]) -> dict[int, list[EarlierTurn]]:
    """For each reply, the earlier turns it quoted (reply_turns) that are not in the trash, in context order."""
    found: dict[int, list[EarlierTurn]] = {}
    for chunk, marks in _chunks(episode_ids):
        rows = db.query(f"SELECT r.episode_id AS reply, r.why, r.drew_on, {_EARLIER} FROM reply_turns r "
                        f"JOIN episodes e ON e.id = r.turn_id {_ITS_SESSION} WHERE r.episode_id IN ({marks}) "
                        "AND e.deleted_at IS NULL ORDER BY r.episode_id, r.rank", chunk)
        for row in rows:
            found.setdefault(row["reply"], []).append(_earlier(row, row["why"], bool(row["drew_on"])))
    return found


def earlier_turns(db: Database, episode_ids: Sequence[int], whys: Sequence[str] = ()) -> list[EarlierTurn]:
    """The earlier turns a reply being written quotes (PreparedTurn.used_episodes and episode_whys), in that order."""
    ids = [int(i) for i in episode_ids]
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = {r["id"]: r for r in db.query(f"SELECT {_EARLIER} FROM episodes e {_ITS_SESSION} WHERE e.id IN ({marks}) "
                                         "AND e.deleted_at IS NULL", ids)}
    reasons = list(whys) + [""] * (len(ids) - len(whys))
    return [_earlier(rows[i], why) for i, why in zip(ids, reasons) if i in rows]


def _earlier(row: dict, why: str, drew_on: bool | None = None) -> EarlierTurn:
    return EarlierTurn(int(row["id"]), row["session_id"], str(row["title"]), float(row["created_at"]),
                       str(row["user_text"]), str(why or ""), drew_on, row["forgotten_at"] is not None)
