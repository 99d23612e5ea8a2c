"""Forget everything: a backup of the whole store first, then one transaction that empties what Engram knows.

What goes: every memory with its history, links, entities and vectors; every conversation (sessions and their
turns); the memory graph's edges; hypotheses and learning goals; what the user rejected; the forgetting log;
the behaviour notes reflection wrote; queued idle-time jobs (they would work on what is gone). The active
fine-tuned adapter is switched off (it learned from what is gone) but kept on disk with its versions, as are
settings, downloaded models and the job history. The backup holds it all, so restoring it undoes the wipe.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core import words
from core.errors import InvalidInput, StoreBusy
from core.store import vector_clusters, vector_scan, vectors
from core.store.vector_schema import VEC_TABLES

if TYPE_CHECKING:  # annotations only: db imports the migrations, never this module
    from core.store.db import Database

# Children before parents (foreign keys are on); FTS rows go with their tables through the triggers.
WIPED_TABLES = ("reply_memories", "reply_turns", "memory_sources", "memory_entities", "hypothesis_evidence", "edges",
                "memory_history", "forgetting_events", "rejections", "learning_goals", "hypotheses", "memories",
                "entities", "turn_learning", "episode_sentences", "episodes", "sessions")
# Parents before children, for putting a backup's rows back.
RESTORED_TABLES = ("sessions", "memories", "episodes", "episode_sentences", "entities", "hypotheses",
                   "learning_goals", "memory_sources", "memory_entities", "hypothesis_evidence", "edges",
                   "reply_memories", "reply_turns", "memory_history", "forgetting_events", "rejections",
                   "turn_learning")
# What the user sees counted: the table, and its name in words.
COUNTED = (("memories", "memories", "memory"), ("episodes", "conversation turns", "conversation turn"),
           ("sessions", "conversations", "conversation"), ("edges", "graph links", "graph link"),
           ("hypotheses", "hypotheses", "hypothesis"), ("learning_goals", "learning goals", "learning goal"))
ONE_OF = {many: one for _, many, one in COUNTED}  # "1 memory", not "1 memories"
META_KEYS = ("behaviour_instructions", "consolidation_memory_cursor", "learned_retention", "learned_recall",
             "sentences_backfill_below")
LABEL = "before-forget-everything"
ATTEMPTS = 3  # backups taken before giving up on a store another process keeps writing
WHAT_STAYS = "settings, downloaded models, fine-tuned adapters (switched off) and the job history"


@dataclass(frozen=True)
class WipeResult:
    backup: Path
    counts: dict[str, int] = field(default_factory=dict)  # words → rows erased (COUNTED)

    def summary(self) -> str:
        return describe(self.counts)


def describe(counted: dict[str, int]) -> str:
    """"3 memories, 1 conversation turn, …": what a wipe erases (or erased), in words."""
    return ", ".join(words.counted(n, ONE_OF.get(what, what), what) for what, n in counted.items())


def counts(db: Database) -> dict[str, int]:
    return {what: int(db.scalar(f"SELECT count(*) FROM {table}")) for table, what, _ in COUNTED}


def forget_everything(db: Database, backup_folder: Path) -> WipeResult:
    """Back up, then wipe in one transaction that fails whole or not at all. SQLite cannot copy a connection that
    holds the write lock, so the backup comes first and the wipe checks that no other process committed since
    (PRAGMA data_version): then the backup holds exactly what was erased; otherwise it tries again."""
    from core.store.db import backup  # at call time: db imports the migrations, which must not import this
    for _ in range(ATTEMPTS):
        version = _data_version(db)
        saved = backup(db.conn, Path(backup_folder), label=LABEL)
        with db.transaction():
            if _data_version(db) == version:
                before = counts(db)
                _wipe(db)
                break
        saved.unlink(missing_ok=True)  # another process wrote meanwhile: this copy would miss it
    else:
        raise StoreBusy("the memory store kept changing while Engram tried to back it up; nothing was erased. "
                        "Try again in a moment.")
    db.scrub_wal()  # the erased pages' older copies leave the -wal file too (as a purge does)
    return WipeResult(saved, before)


def _data_version(db: Database) -> int:
    return int(db.scalar("PRAGMA data_version"))


def _wipe(db: Database) -> None:
    for table in WIPED_TABLES:
        db.execute(f"DELETE FROM {table}")
    _wipe_vectors(db)
    db.conn.executemany("DELETE FROM meta WHERE key = ?", [(k,) for k in META_KEYS])
    db.execute("UPDATE adapters SET active = 0 WHERE active = 1")
    _stop_jobs(db)


def _wipe_vectors(db: Database) -> None:
    for name in VEC_TABLES.values():
        for table in (name, f"{name}_float"):
            if db.scalar("SELECT 1 FROM sqlite_schema WHERE name = ?", (table,)) is not None:
                db.execute(f"DELETE FROM {table}")
        vector_clusters.drop(db, name)
        vector_scan.changed(db, name)


def _stop_jobs(db: Database) -> None:
    now = db.now()
    db.execute("UPDATE jobs SET state = 'cancelled', message = 'cancelled: everything was forgotten', "
               "finished_at = ?, updated_at = ? WHERE state IN ('queued', 'paused')", (now, now))
    db.execute("UPDATE jobs SET requested = 'cancel' WHERE state = 'running'")


def bring_back(db: Database, backup_path: Path) -> dict[str, int]:
    """Undo a forget-everything in place (the app keeps its store open): the backup's rows come back in one
    transaction, vectors included. Only while nothing new was learned since: new rows would take the old ids."""
    if any(db.scalar(f"SELECT count(*) FROM {t}") for t in ("memories", "episodes", "sessions")):
        raise InvalidInput("Engram has learned new things since everything was forgotten, so the backup cannot be "
                           "put back here; nothing was changed")
    db.execute("ATTACH DATABASE ? AS saved", (str(backup_path),))  # not inside a transaction: SQLite refuses
    try:
        if db.scalar("PRAGMA saved.user_version") != db.scalar("PRAGMA main.user_version"):
            raise InvalidInput(f"{Path(backup_path).name} was written by another version of Engram; "
                               "nothing was changed")
        with db.transaction():
            for table in RESTORED_TABLES:
                db.execute(f"INSERT INTO main.{table} SELECT * FROM saved.{table}")
            db.conn.executemany("INSERT OR REPLACE INTO main.meta SELECT * FROM saved.meta WHERE key = ?",
                                [(k,) for k in META_KEYS])
            db.execute("UPDATE main.adapters SET active = 1 "
                       "WHERE id = (SELECT id FROM saved.adapters WHERE active = 1)")
            _bring_back_vectors(db)
    finally:
        db.execute("DETACH DATABASE saved")
    return counts(db)


def _bring_back_vectors(db: Database) -> None:
    """From the backup's float vectors: the bit tables and clusters are remade as any new vector's are."""
    for kind, name in VEC_TABLES.items():
        if db.scalar("SELECT 1 FROM saved.sqlite_schema WHERE name = ?", (f"{name}_float",)) is None:
            continue
        rows = db.execute(f"SELECT id, embedding FROM saved.{name}_float ORDER BY id").fetchall()
        if rows:
            vectors.upsert_vectors(db, kind, [i for i, _ in rows],
                                   np.stack([np.frombuffer(b, dtype=np.float32) for _, b in rows]))
