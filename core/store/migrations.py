"""Numbered schema migrations, applied once each inside a transaction with their bookkeeping row.

A migration that has shipped is never edited: change the schema by appending a new one.
Vector tables (vec0) are not here: their dimension belongs to the embedder, so
core.store.vectors creates them when an embedder is bound to the store.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import apsw

from core.store.migrations_later import (v6_rejections, v7_turn_learning, v8_reply_drew_on, v9_sentences,
                                        v10_reply_turns, v11_history_by_action)
from core.store.vector_schema import VEC_TABLES, index_partitions


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[apsw.Connection], None]


BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations(
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
);
"""

_V1_CORE = """
CREATE TABLE meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE sessions(
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    ended_at REAL,
    reflected_at REAL,
    instructions TEXT NOT NULL DEFAULT '',   -- behavioural meta-prompt written for this session (KenLM)
    deleted_at REAL
);

CREATE TABLE episodes(
    id INTEGER PRIMARY KEY,
    session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
    user_text TEXT NOT NULL,
    assistant_text TEXT NOT NULL DEFAULT '',
    speaker TEXT NOT NULL DEFAULT 'user',
    created_at REAL NOT NULL,               -- when the turn happened (may be in the past on import)
    access_count INTEGER NOT NULL DEFAULT 0,
    last_access REAL,
    protected INTEGER NOT NULL DEFAULT 0,
    rating INTEGER,                          -- thumbs: 1 up, -1 down, NULL none
    summary_id INTEGER REFERENCES memories(id) ON DELETE SET NULL,
    forgotten_at REAL,                       -- compacted into summary_id; restorable until purged
    deleted_at REAL,                         -- in the trash
    metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX episodes_session ON episodes(session_id, created_at);
CREATE INDEX episodes_created ON episodes(created_at);

CREATE TABLE memories(
    id INTEGER PRIMARY KEY,
    subject TEXT NOT NULL DEFAULT '',
    relation TEXT NOT NULL DEFAULT '',
    object TEXT NOT NULL DEFAULT '',
    statement TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'semantic' CHECK (kind IN ('episodic', 'semantic', 'summary')),
    critical INTEGER NOT NULL DEFAULT 0,
    confidence REAL NOT NULL DEFAULT 0.7 CHECK (confidence BETWEEN 0 AND 1),
    importance REAL NOT NULL DEFAULT 0.0,
    pinned INTEGER NOT NULL DEFAULT 0,
    protected INTEGER NOT NULL DEFAULT 0,
    permanent INTEGER NOT NULL DEFAULT 0,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_access REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    valid_from REAL,                          -- when it became true in the world
    valid_to REAL,                            -- when it stopped being true in the world
    invalidated_at REAL,                      -- when the store learned it no longer holds
    superseded_by INTEGER REFERENCES memories(id) ON DELETE SET NULL,
    forgotten_at REAL,                        -- archived by forgetting; restorable until purged
    deleted_at REAL                           -- in the trash; purge removes it for good
);
CREATE INDEX memories_triple ON memories(subject, relation);
CREATE INDEX memories_relation ON memories(relation);
CREATE INDEX memories_created ON memories(created_at);

CREATE VIEW active_memories AS
    SELECT * FROM memories
    WHERE invalidated_at IS NULL AND forgotten_at IS NULL AND deleted_at IS NULL;

CREATE TABLE memory_sources(
    memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, episode_id)
) WITHOUT ROWID;
CREATE INDEX memory_sources_episode ON memory_sources(episode_id);

CREATE TABLE entities(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);
CREATE UNIQUE INDEX entities_name ON entities(lower(name));

CREATE TABLE memory_entities(
    memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('subject', 'object', 'mention')),
    PRIMARY KEY (memory_id, entity_id, role)
) WITHOUT ROWID;
CREATE INDEX memory_entities_entity ON memory_entities(entity_id);

-- Undirected weighted edges between memories, stored once with a_id < b_id (MAGS, 001).
CREATE TABLE edges(
    a_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    b_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    kind TEXT NOT NULL DEFAULT 'hebbian' CHECK (kind IN ('hebbian', 'similarity', 'supersedes', 'summary')),
    weight REAL NOT NULL DEFAULT 0.0,
    last_coactivated REAL,
    created_at REAL NOT NULL,
    CHECK (a_id < b_id),
    PRIMARY KEY (a_id, b_id, kind)
) WITHOUT ROWID;
CREATE INDEX edges_b ON edges(b_id);

CREATE TABLE hypotheses(
    id INTEGER PRIMARY KEY,
    dimension TEXT NOT NULL,
    claim TEXT NOT NULL,
    confidence REAL NOT NULL DEFAULT 0.3 CHECK (confidence BETWEEN 0 AND 1),
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'confirmed', 'rejected')),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    decided_at REAL
);

CREATE TABLE hypothesis_evidence(
    hypothesis_id INTEGER NOT NULL REFERENCES hypotheses(id) ON DELETE CASCADE,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    added_at REAL NOT NULL,
    PRIMARY KEY (hypothesis_id, episode_id)
) WITHOUT ROWID;
CREATE INDEX hypothesis_evidence_episode ON hypothesis_evidence(episode_id);

CREATE TABLE learning_goals(
    id INTEGER PRIMARY KEY,
    question TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    answer TEXT NOT NULL DEFAULT '',
    memory_ids TEXT NOT NULL DEFAULT '[]',   -- memories the question is about (e.g. a protected conflict)
    created_at REAL NOT NULL,
    last_considered REAL,
    closed_at REAL
);

-- Append-only: every change to a memory, with the old and new value and why (Mem0-style).
CREATE TABLE memory_history(
    id INTEGER PRIMARY KEY,
    memory_id INTEGER NOT NULL,              -- no foreign key: history outlives a purged row's text
    action TEXT NOT NULL CHECK (action IN ('create', 'update', 'invalidate', 'pin', 'unpin', 'protect',
        'unprotect', 'forget', 'delete', 'restore', 'purge', 'permanent', 'merge')),
    old_value TEXT,                           -- JSON
    new_value TEXT,                           -- JSON
    reason TEXT NOT NULL DEFAULT '',
    at REAL NOT NULL
);
CREATE INDEX memory_history_memory ON memory_history(memory_id, at);
CREATE TRIGGER memory_history_append_only BEFORE UPDATE ON memory_history
BEGIN
    SELECT RAISE(ABORT, 'memory history is append-only');
END;

-- What forgetting did, with the score that caused it; the timeline panel reads this.
CREATE TABLE forgetting_events(
    id INTEGER PRIMARY KEY,
    item_type TEXT NOT NULL CHECK (item_type IN ('memory', 'episode')),
    item_id INTEGER NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('archive', 'compact')),
    retention REAL NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    summary_id INTEGER,
    at REAL NOT NULL,
    restored_at REAL
);
CREATE INDEX forgetting_events_item ON forgetting_events(item_type, item_id);
"""

_V1_FTS = """
CREATE VIRTUAL TABLE memories_fts USING fts5(
    statement, subject, relation, object,
    content='memories', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, statement, subject, relation, object)
    VALUES (new.id, new.statement, new.subject, new.relation, new.object);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, statement, subject, relation, object)
    VALUES ('delete', old.id, old.statement, old.subject, old.relation, old.object);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF statement, subject, relation, object ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, statement, subject, relation, object)
    VALUES ('delete', old.id, old.statement, old.subject, old.relation, old.object);
    INSERT INTO memories_fts(rowid, statement, subject, relation, object)
    VALUES (new.id, new.statement, new.subject, new.relation, new.object);
END;

CREATE VIRTUAL TABLE episodes_fts USING fts5(
    user_text, assistant_text, speaker,
    content='episodes', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
    INSERT INTO episodes_fts(rowid, user_text, assistant_text, speaker)
    VALUES (new.id, new.user_text, new.assistant_text, new.speaker);
END;
CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
    INSERT INTO episodes_fts(episodes_fts, rowid, user_text, assistant_text, speaker)
    VALUES ('delete', old.id, old.user_text, old.assistant_text, old.speaker);
END;
CREATE TRIGGER episodes_fts_update AFTER UPDATE OF user_text, assistant_text, speaker ON episodes BEGIN
    INSERT INTO episodes_fts(episodes_fts, rowid, user_text, assistant_text, speaker)
    VALUES ('delete', old.id, old.user_text, old.assistant_text, old.speaker);
    INSERT INTO episodes_fts(rowid, user_text, assistant_text, speaker)
    VALUES (new.id, new.user_text, new.assistant_text, new.speaker);
END;

-- Deleting from FTS5 must really remove the terms, so purged text leaves the file (SQLite >= 3.44).
INSERT INTO memories_fts(memories_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('secure-delete', 1);
"""


def _v1_initial_schema(conn: apsw.Connection) -> None:
    conn.execute(_V1_CORE)
    conn.execute(_V1_FTS)


_V2_JOBS = """
-- The idle-time job queue (core.scheduler). A running row names its process (owner) and renews
-- heartbeat_at; a row found 'running' without a live owner is resumed from its checkpoint.
CREATE TABLE jobs(
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued'
        CHECK (state IN ('queued', 'running', 'paused', 'done', 'failed', 'cancelled')),
    run_now INTEGER NOT NULL DEFAULT 0,       -- the user asked: skip the idle/quiet-hours conditions
    requested TEXT CHECK (requested IN ('pause', 'cancel')),  -- asked of a running job from elsewhere
    payload TEXT NOT NULL DEFAULT '{}',       -- JSON
    progress REAL NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 1),
    message TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    checkpoint TEXT,                          -- JSON state a resumed run starts from
    owner TEXT,
    heartbeat_at REAL,
    not_before REAL,                          -- retry backoff after a failure
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
);
CREATE INDEX jobs_state ON jobs(state, created_at);
CREATE INDEX jobs_kind ON jobs(kind, state);

-- LoRA adapters, every version kept with its metrics; at most one is active.
CREATE TABLE adapters(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    base_model TEXT NOT NULL,
    path TEXT NOT NULL,
    parent_id INTEGER REFERENCES adapters(id) ON DELETE SET NULL,
    status TEXT NOT NULL DEFAULT 'training'
        CHECK (status IN ('training', 'candidate', 'accepted', 'rejected', 'failed')),
    active INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
    metrics TEXT NOT NULL DEFAULT '{}',       -- JSON: gate scores before/after
    config TEXT NOT NULL DEFAULT '{}',        -- JSON: training settings
    stale_at REAL,                            -- a memory it learned from was edited or deleted
    stale_reason TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    activated_at REAL
);
CREATE UNIQUE INDEX adapters_one_active ON adapters(active) WHERE active = 1;

-- Lineage: what each adapter was trained on.
CREATE TABLE adapter_sources(
    adapter_id INTEGER NOT NULL REFERENCES adapters(id) ON DELETE CASCADE,
    item_type TEXT NOT NULL CHECK (item_type IN ('memory', 'episode', 'hypothesis')),
    item_id INTEGER NOT NULL,
    PRIMARY KEY (adapter_id, item_type, item_id)
) WITHOUT ROWID;
CREATE INDEX adapter_sources_item ON adapter_sources(item_type, item_id);

-- Editing or deleting what an adapter learned from marks that adapter stale, whichever code path did it.
CREATE TRIGGER adapters_stale_memory_edit AFTER UPDATE OF statement, subject, relation, object, deleted_at,
        invalidated_at ON memories
    WHEN old.statement IS NOT new.statement OR old.subject IS NOT new.subject OR old.relation IS NOT new.relation
        OR old.object IS NOT new.object OR (old.deleted_at IS NULL AND new.deleted_at IS NOT NULL)
        OR (old.invalidated_at IS NULL AND new.invalidated_at IS NOT NULL)
BEGIN
    UPDATE adapters SET stale_at = coalesce(new.deleted_at, new.invalidated_at, new.updated_at),
        stale_reason = 'memory ' || new.id || ' changed'
    WHERE stale_at IS NULL AND id IN
        (SELECT adapter_id FROM adapter_sources WHERE item_type = 'memory' AND item_id = new.id);
END;
CREATE TRIGGER adapters_stale_memory_purge AFTER DELETE ON memories
BEGIN
    UPDATE adapters SET stale_at = old.updated_at, stale_reason = 'memory ' || old.id || ' purged'
    WHERE stale_at IS NULL AND id IN
        (SELECT adapter_id FROM adapter_sources WHERE item_type = 'memory' AND item_id = old.id);
END;
CREATE TRIGGER adapters_stale_episode_delete AFTER UPDATE OF deleted_at, rating ON episodes
    WHEN (old.deleted_at IS NULL AND new.deleted_at IS NOT NULL) OR old.rating IS NOT new.rating
BEGIN
    UPDATE adapters SET stale_at = coalesce(new.deleted_at, new.last_access, new.created_at),
        stale_reason = 'conversation ' || new.id || ' changed'
    WHERE stale_at IS NULL AND id IN
        (SELECT adapter_id FROM adapter_sources WHERE item_type = 'episode' AND item_id = new.id);
END;
CREATE TRIGGER adapters_stale_hypothesis AFTER UPDATE OF status, claim ON hypotheses
    WHEN old.status IS NOT new.status OR old.claim IS NOT new.claim
BEGIN
    UPDATE adapters SET stale_at = new.updated_at, stale_reason = 'hypothesis ' || new.id || ' changed'
    WHERE stale_at IS NULL AND id IN
        (SELECT adapter_id FROM adapter_sources WHERE item_type = 'hypothesis' AND item_id = new.id);
END;
"""


def _v2_job_queue(conn: apsw.Connection) -> None:
    conn.execute(_V2_JOBS)


_V3_REPLY_MEMORIES = """
-- Which memories each reply put in its context (the chips under a reply), rated useful or vetoed by the user.
CREATE TABLE reply_memories(
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    rank INTEGER NOT NULL,                    -- position in the context, 0 first
    score REAL NOT NULL DEFAULT 0,            -- recall score (critical facts put first have their own)
    critical INTEGER NOT NULL DEFAULT 0,      -- put first because the request's intent needs it
    useful INTEGER,                           -- usefulness rating: 1 used, 0 not, NULL not rated
    vetoed_at REAL,                           -- the user removed it from this answer
    PRIMARY KEY (episode_id, memory_id)
) WITHOUT ROWID;
CREATE INDEX reply_memories_memory ON reply_memories(memory_id);
"""


def _v3_reply_memories(conn: apsw.Connection) -> None:
    conn.execute(_V3_REPLY_MEMORIES)


def _v4_vector_partition_index(conn: apsw.Connection) -> None:
    for table in VEC_TABLES.values():
        index_partitions(conn, table)  # tables of a store with no embedder yet do not exist: nothing to do


def _v5_forgetting_features(conn: apsw.Connection) -> None:
    """The three terms an item was forgotten with, so the user's restore (or silence) can teach the weights."""
    for column in ("recency", "relevance", "importance", "learned_at"):
        conn.execute(f"ALTER TABLE forgetting_events ADD COLUMN {column} REAL")


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _v1_initial_schema),
    Migration(2, "job queue, adapters and lineage", _v2_job_queue),
    Migration(3, "reply memories: per-reply attribution", _v3_reply_memories),
    Migration(4, "index the partitions of the vector tables", _v4_vector_partition_index),
    Migration(5, "forgetting events keep the terms they were scored with", _v5_forgetting_features),
    Migration(6, "rejections: what the user said is wrong is not learned again", v6_rejections),
    Migration(7, "turn learning: waiting turns indexed, claimed once, given up after a few failures",
              v7_turn_learning),
    Migration(8, "reply memories say which ones the reply drew on", v8_reply_drew_on),
    Migration(9, "a turn's sentences, each with a vector of its own", v9_sentences),
    Migration(10, "reply turns: the earlier turns each reply quoted", v10_reply_turns),
    Migration(11, "pins found by an index, not a scan of the memories' history", v11_history_by_action),
)

LATEST_VERSION = MIGRATIONS[-1].version
