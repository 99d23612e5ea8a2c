"""Hypotheses about the user (KenLM): claim, dimension, confidence, evidence episodes, user decision."""
from __future__ import annotations

from typing import Iterable, Sequence

from core.errors import InvalidInput, NotFound
from core.store.db import Database
from core.store.text import clean_text
from core.types import EpisodeId, Hypothesis, HypothesisId

STATUSES = ("open", "confirmed", "rejected")


def add_hypothesis(db: Database, dimension: str, claim: str, confidence: float,
                   evidence: Iterable[int] = ()) -> HypothesisId:
    dimension = clean_text(dimension, "dimension", max_chars=200)
    claim = clean_text(claim, "claim", max_chars=2000)
    now = db.now()
    with db.transaction():
        db.execute("INSERT INTO hypotheses(dimension, claim, confidence, status, created_at, updated_at) "
                   "VALUES (?, ?, ?, 'open', ?, ?)", (dimension, claim, _unit(confidence), now, now))
        hypothesis_id = HypothesisId(db.conn.last_insert_rowid())
        add_evidence(db, hypothesis_id, evidence)
    return hypothesis_id


def add_evidence(db: Database, hypothesis_id: int, episode_ids: Iterable[int]) -> list[EpisodeId]:
    """Link evidence episodes; returns the ones that were not evidence yet."""
    added = []
    for episode_id in episode_ids:
        db.execute("INSERT OR IGNORE INTO hypothesis_evidence(hypothesis_id, episode_id, added_at) "
                   "VALUES (?, ?, ?)", (int(hypothesis_id), int(episode_id), db.now()))
        if db.conn.changes():
            added.append(EpisodeId(int(episode_id)))
    return added


def set_confidence(db: Database, hypothesis_id: int, confidence: float) -> None:
    db.execute("UPDATE hypotheses SET confidence = ?, updated_at = ? WHERE id = ?",
               (_unit(confidence), db.now(), int(hypothesis_id)))


def decide(db: Database, hypothesis_id: int, status: str) -> Hypothesis:
    """The user's verdict: confirmed, rejected, or back to open."""
    if status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
    get_hypothesis(db, hypothesis_id)
    decided = None if status == "open" else db.now()
    db.execute("UPDATE hypotheses SET status = ?, decided_at = ?, updated_at = ? WHERE id = ?",
               (status, decided, db.now(), int(hypothesis_id)))
    return get_hypothesis(db, hypothesis_id)


def edit_hypothesis(db: Database, hypothesis_id: int, *, claim: str | None = None,
                    dimension: str | None = None) -> Hypothesis:
    """The user rewords a hypothesis; it keeps its evidence and its status."""
    current = get_hypothesis(db, hypothesis_id)
    claim = current.claim if claim is None else clean_text(claim, "claim", max_chars=2000)
    dimension = current.dimension if dimension is None else clean_text(dimension, "dimension", max_chars=200)
    db.execute("UPDATE hypotheses SET claim = ?, dimension = ?, updated_at = ? WHERE id = ?",
               (claim, dimension, db.now(), current.id))
    return get_hypothesis(db, current.id)


def get_hypothesis(db: Database, hypothesis_id: int) -> Hypothesis:
    row = db.query_one("SELECT * FROM hypotheses WHERE id = ?", (int(hypothesis_id),))
    if row is None:
        raise NotFound(f"no hypothesis with id {hypothesis_id}")
    return _hypothesis(db, row)


def list_hypotheses(db: Database, *, status: str | None = None, dimension: str | None = None) -> list[Hypothesis]:
    clauses, params = ["1"], []
    if status is not None:
        if status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        clauses.append("status = ?")
        params.append(status)
    if dimension is not None:
        clauses.append("dimension = ?")
        params.append(dimension)
    rows = db.query(f"SELECT * FROM hypotheses WHERE {' AND '.join(clauses)} ORDER BY confidence DESC, id",
                    params)
    return [_hypothesis(db, r) for r in rows]


def _hypothesis(db: Database, row: dict) -> Hypothesis:
    evidence = tuple(EpisodeId(r[0]) for r in db.execute(
        "SELECT episode_id FROM hypothesis_evidence WHERE hypothesis_id = ? ORDER BY episode_id", (row["id"],)))
    return Hypothesis(id=HypothesisId(row["id"]), dimension=row["dimension"], claim=row["claim"],
                      confidence=row["confidence"], status=row["status"], created_at=row["created_at"],
                      updated_at=row["updated_at"], decided_at=row["decided_at"], evidence_episode_ids=evidence)


def _unit(value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise InvalidInput(f"confidence must be between 0 and 1, not {value}")
    return value


def evidence_counts(db: Database, episode_ids: Sequence[int]) -> dict[int, int]:
    """How many hypotheses each episode is evidence for (importance's is_evidence term)."""
    if not episode_ids:
        return {}
    marks = ",".join("?" * len(episode_ids))
    return {int(e): int(n) for e, n in db.execute(
        f"SELECT episode_id, count(*) FROM hypothesis_evidence WHERE episode_id IN ({marks}) GROUP BY episode_id",
        [int(i) for i in episode_ids])}
