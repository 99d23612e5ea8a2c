"""Learning goals (KenLM): questions Engram wants to ask the user, opened and closed."""
from __future__ import annotations

import json
from typing import Iterable

from core.errors import InvalidInput, NotFound
from core.store.db import Database
from core.store.text import clean_text
from core.types import GoalId, LearningGoal, MemoryId


def open_goal(db: Database, question: str, *, reason: str = "", memory_ids: Iterable[int] = ()) -> GoalId:
    """Open a goal; an identical open question is reused rather than asked twice."""
    question = clean_text(question, "question", max_chars=2000)
    reason = clean_text(reason, "reason", allow_empty=True, max_chars=2000)
    same = db.scalar("SELECT id FROM learning_goals WHERE status = 'open' AND lower(question) = lower(?)",
                     (question,))
    if same is not None:
        return GoalId(same)
    db.execute("INSERT INTO learning_goals(question, reason, memory_ids, created_at) VALUES (?, ?, ?, ?)",
               (question, reason, json.dumps(sorted({int(i) for i in memory_ids})), db.now()))
    return GoalId(db.conn.last_insert_rowid())


def close_goal(db: Database, goal_id: int, answer: str = "") -> LearningGoal:
    goal = get_goal(db, goal_id)
    if goal.status == "closed":
        raise InvalidInput(f"learning goal {goal.id} is already closed")
    answer = clean_text(answer, "answer", allow_empty=True, max_chars=2000)
    db.execute("UPDATE learning_goals SET status = 'closed', answer = ?, closed_at = ? WHERE id = ?",
               (answer, db.now(), goal.id))
    return get_goal(db, goal.id)


def touch_goal(db: Database, goal_id: int) -> None:
    db.execute("UPDATE learning_goals SET last_considered = ? WHERE id = ?", (db.now(), int(goal_id)))


def get_goal(db: Database, goal_id: int) -> LearningGoal:
    row = db.query_one("SELECT * FROM learning_goals WHERE id = ?", (int(goal_id),))
    if row is None:
        raise NotFound(f"no learning goal with id {goal_id}")
    return _goal(row)


def list_goals(db: Database, *, status: str | None = "open") -> list[LearningGoal]:
    if status not in (None, "open", "closed"):
        raise InvalidInput(f"status must be open or closed, not {status!r}")
    where, params = ("WHERE status = ?", [status]) if status else ("", [])
    return [_goal(r) for r in db.query(f"SELECT * FROM learning_goals {where} ORDER BY id", params)]


def _goal(row: dict) -> LearningGoal:
    return LearningGoal(id=GoalId(row["id"]), question=row["question"], status=row["status"],
                        created_at=row["created_at"], reason=row["reason"], answer=row["answer"],
                        memory_ids=tuple(MemoryId(i) for i in json.loads(row["memory_ids"])),
                        last_considered=row["last_considered"], closed_at=row["closed_at"])
