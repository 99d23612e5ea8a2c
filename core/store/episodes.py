"""Episodes: raw chat turns, with access counts and a protected flag (KenLM)."""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from core.errors import InvalidInput, NotFound
from core.store import vectors
from core.store.db import Database
from core.store.text import clean_text
from core.types import Episode, EpisodeId, MemoryId, SessionId


def add_episode(db: Database, user_text: str, assistant_text: str = "", *, session_id: int | None = None,
                speaker: str = "user", created_at: float | None = None,
                metadata: Mapping[str, Any] | None = None) -> EpisodeId:
    user_text = clean_text(user_text, "message")
    assistant_text = clean_text(assistant_text, "reply", allow_empty=True)
    speaker = clean_text(speaker, "speaker", max_chars=200)
    if session_id is not None and db.scalar("SELECT 1 FROM sessions WHERE id = ?",
                                            (_episode_id(session_id, "session"),)) is None:
        raise NotFound(f"no session with id {session_id}")
    db.execute("INSERT INTO episodes(session_id, user_text, assistant_text, speaker, created_at, metadata) "
               "VALUES (?, ?, ?, ?, ?, ?)",
               (session_id, user_text, assistant_text, speaker, db.now() if created_at is None else created_at,
                json.dumps(dict(metadata or {}), ensure_ascii=False)))
    return EpisodeId(db.conn.last_insert_rowid())


def get_episode(db: Database, episode_id: int) -> Episode:
    row = db.query_one("SELECT * FROM episodes WHERE id = ?", (_episode_id(episode_id),))
    if row is None:
        raise NotFound(f"no episode with id {episode_id}")
    return row_to_episode(row)


def get_episodes(db: Database, ids: Sequence[int]) -> dict[int, Episode]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.query(f"SELECT * FROM episodes WHERE id IN ({marks})", [int(i) for i in ids])
    return {EpisodeId(r["id"]): row_to_episode(r) for r in rows}


def row_to_episode(row: dict[str, Any]) -> Episode:
    return Episode(
        id=EpisodeId(row["id"]), user_text=row["user_text"], assistant_text=row["assistant_text"],
        speaker=row["speaker"], session_id=None if row["session_id"] is None else SessionId(row["session_id"]),
        created_at=row["created_at"], access_count=row["access_count"], last_access=row["last_access"],
        protected=bool(row["protected"]), rating=row["rating"],
        summary_id=None if row["summary_id"] is None else MemoryId(row["summary_id"]),
        forgotten_at=row["forgotten_at"], deleted_at=row["deleted_at"], metadata=json.loads(row["metadata"]))


EPISODE_STATUSES = ("active", "trashed", "forgotten")
_STATUS_SQL = {"active": "deleted_at IS NULL AND forgotten_at IS NULL", "trashed": "deleted_at IS NOT NULL",
               "forgotten": "forgotten_at IS NOT NULL AND deleted_at IS NULL"}


def set_episode_protected(db: Database, episode_id: int, protected: bool) -> Episode:
    """A protected episode is never forgotten or compacted, and cannot be deleted until unprotected."""
    episode = get_episode(db, episode_id)
    db.execute("UPDATE episodes SET protected = ? WHERE id = ?", (int(bool(protected)), episode.id))
    return get_episode(db, episode.id)


def trash_episode(db: Database, episode_id: int) -> Episode:
    episode = get_episode(db, episode_id)
    if episode.deleted_at is not None:
        raise InvalidInput(f"episode {episode.id} is already in the trash")
    if episode.protected:
        raise InvalidInput(f"episode {episode.id} is protected; unprotect it before deleting it")
    db.execute("UPDATE episodes SET deleted_at = ? WHERE id = ?", (db.now(), episode.id))
    return get_episode(db, episode.id)


def restore_episode(db: Database, episode_id: int) -> Episode:
    """Bring a trashed or forgotten episode back."""
    episode = get_episode(db, episode_id)
    if episode.deleted_at is None and episode.forgotten_at is None:
        raise InvalidInput(f"episode {episode.id} is not in the trash or forgotten; there is nothing to restore")
    with db.transaction():
        db.execute("UPDATE episodes SET deleted_at = NULL, forgotten_at = NULL WHERE id = ?", (episode.id,))
        db.execute("UPDATE forgetting_events SET restored_at = ? WHERE item_type = 'episode' AND item_id = ? "
                   "AND restored_at IS NULL", (db.now(), episode.id))
    return get_episode(db, episode.id)


def list_episodes(db: Database, *, session_id: int | None = None, status: str | None = "active",
                  protected: bool | None = None, limit: int = 100, offset: int = 0,
                  on_path: bool = False) -> list[Episode]:
    """Episodes matching every given filter, newest first; status None means all of them. `on_path`: only the
    turns of the branch the conversation shows (core.store.branches)."""
    clauses, params = ["1"], []
    if on_path:
        clauses.append("json_extract(metadata, '$.off_path') IS NULL")
    if status is not None:
        if status not in _STATUS_SQL:
            raise InvalidInput(f"status must be one of {', '.join(EPISODE_STATUSES)}, not {status!r}")
        clauses.append(_STATUS_SQL[status])
    if session_id is not None:
        clauses.append("session_id = ?")
        params.append(_episode_id(session_id, "session"))
    if protected is not None:
        clauses.append("protected = ?")
        params.append(int(bool(protected)))
    rows = db.query(f"SELECT * FROM episodes WHERE {' AND '.join(clauses)} "
                    "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?", [*params, int(limit), int(offset)])
    return [row_to_episode(r) for r in rows]


def trashed_episode_ids(db: Database) -> list[EpisodeId]:
    return [EpisodeId(r[0]) for r in db.execute("SELECT id FROM episodes WHERE deleted_at IS NOT NULL ORDER BY id")]


def purge_episode_rows(db: Database, ids: Sequence[int]) -> int:
    """Hard delete of trashed episodes with their vectors, FTS terms and evidence links."""
    episodes = [get_episode(db, i) for i in ids]
    for episode in episodes:
        if episode.deleted_at is None:
            raise InvalidInput(f"episode {episode.id} is not in the trash; delete it before purging it")
    with db.transaction():
        vectors.delete_vectors(db, "episode", [e.id for e in episodes])
        for episode in episodes:
            db.execute("DELETE FROM episodes WHERE id = ?", (episode.id,))  # FTS by trigger, links by cascade
    return len(episodes)


def _episode_id(value: Any, what: str = "episode") -> int:
    if isinstance(value, bool):
        raise InvalidInput(f"{value!r} is not a valid {what} id")
    try:
        return int(value) if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise InvalidInput(f"{value!r} is not a valid {what} id") from None
