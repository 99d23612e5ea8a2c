"""Sessions: conversations that group episodes, each with its own behavioural instructions."""
from __future__ import annotations

from typing import Any

from core.errors import NotFound
from core.store.db import Database
from core.store.text import clean_text
from core.types import Session, SessionId

MAX_TITLE_CHARS = 500


def create_session(db: Database, title: str = "", *, instructions: str = "",
                   created_at: float | None = None) -> SessionId:
    title = clean_text(title, "title", allow_empty=True, max_chars=MAX_TITLE_CHARS)
    instructions = clean_text(instructions, "instructions", allow_empty=True)
    now = db.now() if created_at is None else created_at
    db.execute("INSERT INTO sessions(title, instructions, created_at, updated_at) VALUES (?, ?, ?, ?)",
               (title, instructions, now, now))
    return SessionId(db.conn.last_insert_rowid())


def get_session(db: Database, session_id: int) -> Session:
    row = db.query_one("SELECT * FROM sessions WHERE id = ?", (int(session_id),))
    if row is None:
        raise NotFound(f"no session with id {session_id}")
    return row_to_session(row)


def list_sessions(db: Database, *, include_deleted: bool = False, limit: int = 100) -> list[Session]:
    where = "" if include_deleted else "WHERE deleted_at IS NULL"
    rows = db.query(f"SELECT * FROM sessions {where} ORDER BY updated_at DESC, id DESC LIMIT ?", (int(limit),))
    return [row_to_session(r) for r in rows]


def search_sessions(db: Database, text: str, *, limit: int = 100) -> list[Session]:
    """Conversations whose title or any turn contains `text` (case-insensitive), newest first."""
    text = clean_text(text, "search", allow_empty=True, max_chars=MAX_TITLE_CHARS).strip()
    if not text:
        return list_sessions(db, limit=limit)
    pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = db.query("SELECT * FROM sessions s WHERE s.deleted_at IS NULL AND (s.title LIKE :p ESCAPE '\\' "
                    "OR EXISTS (SELECT 1 FROM episodes e WHERE e.session_id = s.id AND e.deleted_at IS NULL "
                    "AND (e.user_text LIKE :p ESCAPE '\\' OR e.assistant_text LIKE :p ESCAPE '\\'))) "
                    "ORDER BY s.updated_at DESC, s.id DESC LIMIT :n", {"p": pattern, "n": int(limit)})
    return [row_to_session(r) for r in rows]


def trash_session(db: Database, session_id: int) -> Session:
    """Hide a conversation from the list; its turns, and what was learned from them, stay in the store."""
    return _update(db, session_id, deleted_at=db.now())


def rename_session(db: Database, session_id: int, title: str) -> Session:
    title = clean_text(title, "title", allow_empty=True, max_chars=MAX_TITLE_CHARS)
    return _update(db, session_id, title=title)


def set_instructions(db: Database, session_id: int, instructions: str) -> Session:
    return _update(db, session_id, instructions=clean_text(instructions, "instructions", allow_empty=True))


def end_session(db: Database, session_id: int) -> Session:
    return _update(db, session_id, ended_at=db.now())


def mark_reflected(db: Database, session_id: int) -> Session:
    return _update(db, session_id, reflected_at=db.now())


def touch_session(db: Database, session_id: int) -> Session:
    return _update(db, session_id)


def _update(db: Database, session_id: int, **values: Any) -> Session:
    get_session(db, session_id)  # NotFound before anything changes
    values["updated_at"] = db.now()
    assignments = ", ".join(f"{name} = ?" for name in values)
    db.execute(f"UPDATE sessions SET {assignments} WHERE id = ?", [*values.values(), int(session_id)])
    return get_session(db, session_id)


def discard_if_empty(db: Database, session_id: int) -> bool:
    """Remove a session no turn was ever written to (its first message was refused); True if it was removed."""
    with db.transaction():
        if db.scalar("SELECT 1 FROM episodes WHERE session_id = ? LIMIT 1", (int(session_id),)):
            return False
        db.execute("DELETE FROM sessions WHERE id = ?", (int(session_id),))
    return True


def row_to_session(row: dict[str, Any]) -> Session:
    return Session(id=SessionId(row["id"]), title=row["title"], created_at=row["created_at"],
                   updated_at=row["updated_at"], ended_at=row["ended_at"], reflected_at=row["reflected_at"],
                   instructions=row["instructions"], deleted_at=row["deleted_at"])
