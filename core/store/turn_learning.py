"""Chat turns waiting to be learned, and who is learning one now (table turn_learning, migration 7).

A stored turn waits as episodes.metadata "learning": "pending"; the partial index episodes_learning_pending finds
those without reading every episode's JSON. A learner claims a turn in one write transaction (BEGIN IMMEDIATE)
before any model call, so the chat's queue and the idle job — in this process or another — never learn the same
turn twice. The claim row counts the tries: a turn whose learning keeps failing is given up after MAX_ATTEMPTS
("learning": "failed", the last error kept) and stays an episode like any other. A busy store is not the turn's
fault: that try is not counted. A claim whose process died is taken over (that try counts: a turn that kills its
learner every time is given up too). The user can ask for another go (`requeue`): a given-up turn waits again with
fresh tries, and is learned through the same claim as any other.
"""
from __future__ import annotations

import json
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Callable, Sequence

import apsw

from core.errors import InvalidInput, NotFound, StoreBusy
from core.scheduler import owner_is_alive
from core.store.db import Database

PENDING, DONE, FAILED = "pending", "done", "failed"  # an episode's metadata "learning"
SKIPPED = "skipped"  # the user chose not to have this turn learned (Skip under the reply)
MAX_ATTEMPTS = 3
RETRY_AFTER = 600.0  # seconds before a failed turn waits again for the idle pass, times the tries so far
CLAIM_LEASE = 2 * 3600.0  # a live process's claim this old is taken over: its release was lost (a busy store)
TRANSIENT = (StoreBusy, apsw.BusyError)

# Must repeat the partial index's WHERE word for word, literal 'pending' included, for SQLite to use the index.
_PENDING_SQL = """
SELECT e.id, t.owner, t.claimed_at FROM episodes AS e LEFT JOIN turn_learning AS t ON t.episode_id = e.id
WHERE json_extract(e.metadata, '$.learning') = 'pending' AND e.deleted_at IS NULL AND e.forgotten_at IS NULL
    AND (t.retry_at IS NULL OR t.retry_at <= ?)
ORDER BY e.created_at, e.id LIMIT ?
"""

Alive = Callable[[str], bool]


@dataclass(frozen=True)
class Claim:
    episode_id: int
    owner: str
    attempt: int  # 1 for the first try


@dataclass(frozen=True)
class GivenUp:
    episode_id: int
    attempts: int
    last_error: str


def new_owner() -> str:
    """'host:pid:token', like the scheduler's job owners: a dead pid on this host frees the claim."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def pending(db: Database, limit: int = 100, alive: Alive = owner_is_alive) -> list[int]:
    """Turns waiting to be learned, oldest first: not learned yet, not being learned by a live learner, not
    waiting to be tried again after a failure."""
    now = db.now()
    held = int(db.scalar("SELECT count(*) FROM turn_learning WHERE owner IS NOT NULL") or 0)
    rows = db.execute(_PENDING_SQL, (now, int(limit) + held)).fetchall()
    free = [int(r[0]) for r in rows if r[1] is None or not _held(r[1], r[2], now, alive)]
    return free[: int(limit)]


def claim(db: Database, episode_id: int, owner: str, alive: Alive = owner_is_alive) -> Claim | None:
    """Take the turn for `owner`, or None: learned already, given up, or a live learner has it."""
    return db.retrying(lambda: _claim(db, int(episode_id), owner, alive))


def _claim(db: Database, episode_id: int, owner: str, alive: Alive) -> Claim | None:
    now = db.now()
    with db.transaction():
        state = db.query_one("SELECT json_extract(metadata, '$.learning') AS learning FROM episodes WHERE id = ?",
                             (episode_id,))
        if state is None or state["learning"] not in (None, PENDING):
            return None
        row = db.query_one("SELECT owner, claimed_at, attempts FROM turn_learning WHERE episode_id = ?",
                           (episode_id,))
        if row is not None and row["owner"] is not None:
            if _held(row["owner"], row["claimed_at"], now, alive):
                return None
            if row["attempts"] >= MAX_ATTEMPTS:  # its learner died mid-way every time
                _give_up(db, episode_id, f"learning was interrupted {row['attempts']} times")
                return None
        db.execute("INSERT INTO turn_learning(episode_id, owner, claimed_at, attempts) VALUES (?, ?, ?, 1) "
                   "ON CONFLICT(episode_id) DO UPDATE SET owner = excluded.owner, claimed_at = excluded.claimed_at, "
                   "attempts = attempts + 1", (episode_id, owner, now))
        attempts = db.scalar("SELECT attempts FROM turn_learning WHERE episode_id = ?", (episode_id,))
    return Claim(episode_id, owner, int(attempts))


def done(db: Database, claim: Claim) -> None:
    """Learned: the turn is marked so and its claim row goes."""
    def write() -> None:
        with db.transaction():
            db.execute("UPDATE episodes SET metadata = json_remove(json_set(metadata, '$.learning', ?), "
                       "'$.extracted') WHERE id = ?", (DONE, claim.episode_id))
            db.execute("DELETE FROM turn_learning WHERE episode_id = ?", (claim.episode_id,))
    db.retrying(write)


def release(db: Database, claim: Claim) -> None:
    """Not learned, through no fault of the turn (a reply came first, no model, a busy store): the try is not
    counted and the turn waits as before."""
    def write() -> None:
        with db.transaction():
            db.execute("UPDATE turn_learning SET owner = NULL, claimed_at = NULL, attempts = max(attempts - 1, 0) "
                       "WHERE episode_id = ? AND owner = ?", (claim.episode_id, claim.owner))
            db.execute("DELETE FROM turn_learning WHERE episode_id = ? AND attempts = 0 AND last_error = ''",
                       (claim.episode_id,))
    _quietly(db, write)


def failed(db: Database, claim: Claim, error: BaseException) -> bool:
    """Learning raised. A busy store or an interruption (Ctrl-C) is released uncounted; any other error is
    counted: the turn is tried again after a pause, or given up after MAX_ATTEMPTS. True when given up."""
    if isinstance(error, TRANSIENT) or not isinstance(error, Exception):
        release(db, claim)
        return False
    words = f"{type(error).__name__}: {error}"[:500]
    gave_up = claim.attempt >= MAX_ATTEMPTS

    def write() -> None:
        with db.transaction():
            db.execute("UPDATE turn_learning SET owner = NULL, claimed_at = NULL, last_error = ?, retry_at = ? "
                       "WHERE episode_id = ? AND owner = ?",
                       (words, db.now() + RETRY_AFTER * claim.attempt, claim.episode_id, claim.owner))
            if gave_up:
                _give_up(db, claim.episode_id, words)
    _quietly(db, write)
    return gave_up


def requeue(db: Database, episode_ids: Sequence[int]) -> list[int]:
    """The user asks to try again, in one transaction: a given-up turn waits again with MAX_ATTEMPTS fresh tries,
    a turn waiting after a failure loses its pause. Nothing else changes: a learner still has to claim each one,
    and a live learner's claim is left alone. Returns the given-up ones; InvalidInput for a turn learned already
    (or never waiting), NotFound for no such turn — and then nothing is changed."""
    def write() -> list[int]:
        with db.transaction():
            return [i for i in dict.fromkeys(int(i) for i in episode_ids) if _requeue(db, i)]
    return db.retrying(write)


def _requeue(db: Database, episode_id: int) -> bool:
    state = db.query_one("SELECT json_extract(metadata, '$.learning') AS learning FROM episodes "
                         "WHERE id = ? AND deleted_at IS NULL", (episode_id,))
    if state is None:
        raise NotFound(f"no conversation turn {episode_id}")
    if state["learning"] in (FAILED, SKIPPED):
        db.execute("UPDATE episodes SET metadata = json_set(metadata, '$.learning', ?) WHERE id = ?",
                   (PENDING, episode_id))
        db.execute("DELETE FROM turn_learning WHERE episode_id = ?", (episode_id,))
        return True
    if state["learning"] == DONE:
        raise InvalidInput(f"turn {episode_id} was learned already")
    if state["learning"] != PENDING:  # an episode that never waited to be learned (not a chat turn)
        raise InvalidInput(f"turn {episode_id} is not waiting to be learned")
    db.execute("UPDATE turn_learning SET retry_at = NULL WHERE episode_id = ?", (episode_id,))
    return False


def keep_extracted(db: Database, episode_id: int, facts: list[dict]) -> None:
    """What the turn's extraction found (plain dicts of core.memory.engram.Fact), kept with the turn until it is
    learned: a learning that gives way to a reply resumes from here instead of asking the model again."""
    with db.transaction():  # a busy store raises, as the facts' own writes would: that try is not counted
        db.execute("UPDATE episodes SET metadata = json_set(metadata, '$.extracted', json(?)) WHERE id = ?",
                   (json.dumps(facts), int(episode_id)))


def extracted(db: Database, episode_id: int) -> list[dict] | None:
    """The facts kept by keep_extracted, or None when the turn was not extracted yet."""
    kept = db.scalar("SELECT json_extract(metadata, '$.extracted') FROM episodes WHERE id = ?", (int(episode_id),))
    return None if kept is None else list(json.loads(kept))


def orphaned(db: Database, alive: Alive = owner_is_alive) -> list[int]:
    """Waiting turns claimed by a process that is gone (a closed `engram chat`): free to take over at once."""
    rows = db.query("SELECT t.episode_id, t.owner FROM turn_learning AS t JOIN episodes AS e ON e.id = t.episode_id "
                    "WHERE t.owner IS NOT NULL AND json_extract(e.metadata, '$.learning') = 'pending' "
                    "ORDER BY t.episode_id")
    return [int(r["episode_id"]) for r in rows if not alive(r["owner"])]


def skip(db: Database, episode_id: int) -> bool:
    """The user skips learning this turn: it no longer waits (what was written before stays, with its Undo).
    False when it was not waiting (learned already, or given up)."""
    def write() -> bool:
        with db.transaction():
            state = db.scalar("SELECT json_extract(metadata, '$.learning') FROM episodes WHERE id = ?",
                              (int(episode_id),))
            if state != PENDING:
                return False
            db.execute("UPDATE episodes SET metadata = json_set(metadata, '$.learning', ?) WHERE id = ?",
                       (SKIPPED, int(episode_id)))
            db.execute("DELETE FROM turn_learning WHERE episode_id = ?", (int(episode_id),))
            return True
    return db.retrying(write)


def given_up(db: Database, ids: list[int] | None = None) -> list[GivenUp]:
    """Turns whose learning was given up (all, or those of `ids`), with their last error."""
    rows = db.query("SELECT t.episode_id, t.attempts, t.last_error FROM turn_learning AS t JOIN episodes AS e "
                    "ON e.id = t.episode_id WHERE json_extract(e.metadata, '$.learning') = ? ORDER BY t.episode_id",
                    (FAILED,))
    wanted = None if ids is None else {int(i) for i in ids}
    return [GivenUp(r["episode_id"], r["attempts"], r["last_error"]) for r in rows
            if wanted is None or r["episode_id"] in wanted]


def _give_up(db: Database, episode_id: int, words: str) -> None:
    db.execute("UPDATE episodes SET metadata = json_set(metadata, '$.learning', ?) WHERE id = ?",
               (FAILED, episode_id))
    db.execute("UPDATE turn_learning SET owner = NULL, claimed_at = NULL, retry_at = NULL, "
               "last_error = CASE WHEN last_error = '' THEN ? ELSE last_error END WHERE episode_id = ?",
               (words, episode_id))


def _held(owner: str, claimed_at: float | None, now: float, alive: Alive) -> bool:
    return claimed_at is not None and now - claimed_at < CLAIM_LEASE and alive(owner)


def _quietly(db: Database, write: Callable[[], None]) -> None:
    """Write after a failure without hiding it: a store still busy leaves the claim to expire (CLAIM_LEASE)."""
    try:
        db.retrying(write)
    except StoreBusy:
        pass
