"""Episodes: raw chat turns, with access counts and a protected flag (KenLM)."""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from core.errors import NotFound
from core.store.db import Database
from core.store.text import clean_text
from core.types import Episode, EpisodeId, MemoryId, SessionId


def add_episode(db: Database, user_text: str, assistant_text: str = "", *, session_id: int | None = None,
                speaker: str = "user", created_at: float | None = None,
                metadata: Mapping[str, Any] | None = None) -> EpisodeId:
    user_text = clean_text(user_text, "message")
    assistant_text = clean_text(assistant_text, "reply", allow_empty=True)
    speaker = clean_text(speaker, "speaker", max_chars=200)
    if session_id is not None and db.scalar("SELECT 1 FROM sessions WHERE id = ?", (int(session_id),)) is None:
        raise NotFound(f"no session with id {session_id}")
    db.execute("INSERT INTO episodes(session_id, user_text, assistant_text, speaker, created_at, metadata) "
               "VALUES (?, ?, ?, ?, ?, ?)",
               (session_id, user_text, assistant_text, speaker, db.now() if created_at is None else created_at,
                json.dumps(dict(metadata or {}), ensure_ascii=False)))
    return EpisodeId(db.conn.last_insert_rowid())


def get_episode(db: Database, episode_id: int) -> Episode:
    row = db.query_one("SELECT * FROM episodes WHERE id = ?", (int(episode_id),))
    if row is None:
        raise NotFound(f"no episode with id {episode_id}")
    return row_to_episode(row)


def get_episodes(db: Database, ids: Sequence[int]) -> dict[EpisodeId, Episode]:
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
