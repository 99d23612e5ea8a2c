"""The persistent job queue: rows in `jobs` (migration 2), read and changed only through these functions.

A job is claimed atomically; the claiming process writes its owner id and renews `heartbeat_at`, so
another process can tell a live running job from one orphaned by a crash or a quit.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NewType

from core.errors import InvalidInput, NotFound
from core.store.db import Database

JobId = NewType("JobId", int)

JOB_STATES = ("queued", "running", "paused", "done", "failed", "cancelled")
FINISHED_STATES = ("done", "failed", "cancelled")
OPEN_STATES = ("queued", "running", "paused")
MAX_MESSAGE = 500
MAX_ERROR = 2000


@dataclass(frozen=True)
class Job:
    id: JobId
    kind: str
    state: str
    run_now: bool = False
    requested: str | None = None
    payload: Mapping[str, Any] | None = None
    progress: float = 0.0
    message: str = ""
    attempts: int = 0
    last_error: str = ""
    checkpoint: Mapping[str, Any] | None = None
    owner: str | None = None
    heartbeat_at: float | None = None
    not_before: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES


def _row_to_job(row: Mapping[str, Any]) -> Job:
    data = dict(row)
    data["payload"] = json.loads(data["payload"] or "{}")
    data["checkpoint"] = json.loads(data["checkpoint"]) if data["checkpoint"] else None
    data["run_now"] = bool(data["run_now"])
    data["id"] = JobId(data["id"])
    return Job(**data)


def enqueue(db: Database, kind: str, *, payload: Mapping[str, Any] | None = None, run_now: bool = False,
            dedupe: bool = True) -> Job:
    """Add a job; with `dedupe`, an open job of the same kind and payload is returned instead (and promoted
    to run-now if asked)."""
    kind = (kind or "").strip()
    if not kind:
        raise InvalidInput("a job needs a kind")
    payload_text = json.dumps(dict(payload or {}), sort_keys=True)
    now = db.now()
    with db.transaction():
        if dedupe:
            existing = db.query_one(
                "SELECT * FROM jobs WHERE kind = ? AND payload = ? AND state IN ('queued', 'running', 'paused') "
                "ORDER BY id LIMIT 1", (kind, payload_text))
            if existing is not None:
                if run_now and not existing["run_now"]:
                    db.execute("UPDATE jobs SET run_now = 1, updated_at = ? WHERE id = ?", (now, existing["id"]))
                return get_job(db, existing["id"])
        db.execute("INSERT INTO jobs(kind, state, run_now, payload, created_at, updated_at) "
                   "VALUES (?, 'queued', ?, ?, ?, ?)", (kind, int(run_now), payload_text, now, now))
        job_id = db.conn.last_insert_rowid()
    return get_job(db, job_id)


def get_job(db: Database, job_id: int) -> Job:
    row = db.query_one("SELECT * FROM jobs WHERE id = ?", (int(job_id),))
    if row is None:
        raise NotFound(f"no job with id {job_id}")
    return _row_to_job(row)


def list_jobs(db: Database, *, states: Iterable[str] | None = None, kind: str | None = None,
              limit: int = 100) -> list[Job]:
    sql = "SELECT * FROM jobs WHERE 1"
    params: list[Any] = []
    if states is not None:
        states = list(states)
        _check_states(states)
        sql += f" AND state IN ({','.join('?' * len(states))})"
        params += states
    if kind is not None:
        sql += " AND kind = ?"
        params.append(kind)
    sql += " ORDER BY id DESC LIMIT ?"
    params.append(int(limit))
    return [_row_to_job(r) for r in db.query(sql, params)]


def last_finished(db: Database, kind: str) -> Job | None:
    row = db.query_one("SELECT * FROM jobs WHERE kind = ? AND state = 'done' ORDER BY finished_at DESC LIMIT 1",
                       (kind,))
    return _row_to_job(row) if row else None


def claim(db: Database, job_id: int, owner: str, *, heavy_kinds: Iterable[str] = ()) -> Job | None:
    """Mark a queued job running for `owner`; None if it is no longer queued, or if it is heavy and another
    heavy job is already running (checked in the same transaction, so two processes cannot both win)."""
    heavy_kinds = list(heavy_kinds)
    now = db.now()
    with db.transaction():
        row = db.query_one("SELECT kind, state FROM jobs WHERE id = ?", (int(job_id),))
        if row is None or row["state"] != "queued":
            return None
        if row["kind"] in heavy_kinds and heavy_kinds:
            busy = db.scalar(f"SELECT count(*) FROM jobs WHERE state = 'running' AND "
                             f"kind IN ({','.join('?' * len(heavy_kinds))})", heavy_kinds)
            if busy:
                return None
        db.execute("UPDATE jobs SET state = 'running', owner = ?, heartbeat_at = ?, started_at = ?, "
                   "attempts = attempts + 1, requested = NULL, updated_at = ? WHERE id = ?",
                   (owner, now, now, now, int(job_id)))
    return get_job(db, job_id)


def heartbeat(db: Database, job_id: int, *, progress: float | None = None, message: str | None = None) -> None:
    now = db.now()
    sets = ["heartbeat_at = ?", "updated_at = ?"]
    params: list[Any] = [now, now]
    if progress is not None:
        sets.append("progress = ?")
        params.append(min(1.0, max(0.0, float(progress))))
    if message is not None:
        sets.append("message = ?")
        params.append(str(message)[:MAX_MESSAGE])
    db.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE id = ?", (*params, int(job_id)))


def save_checkpoint(db: Database, job_id: int, state: Mapping[str, Any]) -> None:
    """Persist the state a resumed run starts from. It must be JSON: it outlives the process."""
    try:
        text = json.dumps(dict(state), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"a job checkpoint must be JSON-serialisable: {exc}") from None
    now = db.now()
    db.execute("UPDATE jobs SET checkpoint = ?, heartbeat_at = ?, updated_at = ? WHERE id = ?",
               (text, now, now, int(job_id)))


def requested_action(db: Database, job_id: int) -> str | None:
    return db.scalar("SELECT requested FROM jobs WHERE id = ?", (int(job_id),))


def finish(db: Database, job_id: int, state: str, *, error: str = "", not_before: float | None = None) -> Job:
    """Leave the running state: done / failed / cancelled end it; queued / paused keep its checkpoint."""
    _check_states([state])
    if state == "running":
        raise InvalidInput("finish() takes a job out of 'running'")
    now = db.now()
    finished_at = now if state in FINISHED_STATES else None
    progress_sql = ", progress = 1" if state == "done" else ""
    with db.transaction():
        db.execute(f"UPDATE jobs SET state = ?, owner = NULL, requested = NULL, finished_at = ?, "
                   f"last_error = CASE WHEN ? != '' THEN ? ELSE last_error END, not_before = ?, run_now = "
                   f"CASE WHEN ? IN ('queued') THEN run_now ELSE 0 END, updated_at = ?{progress_sql} WHERE id = ?",
                   (state, finished_at, error, error[:MAX_ERROR], not_before, state, now, int(job_id)))
    return get_job(db, job_id)


def request(db: Database, job_id: int, action: str) -> Job:
    """pause / cancel / resume. A queued or paused job changes at once; a running one is asked, and its
    runner stops at its next yield point."""
    if action not in ("pause", "cancel", "resume"):
        raise InvalidInput(f"unknown job action {action!r}; use pause, cancel or resume")
    job = get_job(db, job_id)
    if job.state in FINISHED_STATES:
        raise InvalidInput(f"job {job.id} is already {job.state}")
    now = db.now()
    if job.state == "running":
        if action == "resume":
            db.execute("UPDATE jobs SET requested = NULL, updated_at = ? WHERE id = ?", (now, job.id))
        else:
            db.execute("UPDATE jobs SET requested = ?, updated_at = ? WHERE id = ?", (action, now, job.id))
    else:
        target = {"pause": "paused", "cancel": "cancelled", "resume": "queued"}[action]
        finished_at = now if target == "cancelled" else None
        run_now = 1 if action == "resume" else 0
        db.execute("UPDATE jobs SET state = ?, finished_at = ?, run_now = ?, not_before = NULL, updated_at = ? "
                   "WHERE id = ?", (target, finished_at, run_now, now, job.id))
    return get_job(db, job.id)


def running_jobs(db: Database) -> list[Job]:
    return [_row_to_job(r) for r in db.query("SELECT * FROM jobs WHERE state = 'running' ORDER BY id")]


def requeue_orphan(db: Database, job_id: int, reason: str) -> Job:
    """A running row whose process is gone: back to the queue with its checkpoint (or paused, if that was
    asked before the crash)."""
    job = get_job(db, job_id)
    target = {"pause": "paused", "cancel": "cancelled"}.get(job.requested or "", "queued")
    return finish(db, job_id, target, error=reason)


def _check_states(states: Iterable[str]) -> None:
    for state in states:
        if state not in JOB_STATES:
            raise InvalidInput(f"unknown job state {state!r}; one of {', '.join(JOB_STATES)}")
