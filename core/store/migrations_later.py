"""Schema migrations from 6 on, kept apart so core/store/migrations.py (1–5, and the ordered list) stays small.

Same rules as there: a migration that has shipped is never edited; each runs once, inside a transaction with its
bookkeeping row, so a crash half-way leaves the previous version whole and the next open runs it again.
"""
from __future__ import annotations

import apsw

_V6_REJECTIONS = """
-- "This is wrong": learning drops a fact with one of these keys (hashes, never text: a purge leaves none).
CREATE TABLE rejections(
    key TEXT PRIMARY KEY,
    memory_id INTEGER,                        -- the memory it was said of; restoring that memory lifts it
    created_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX rejections_memory ON rejections(memory_id);
"""


def v6_rejections(conn: apsw.Connection) -> None:  # what the user said is wrong (core.memory.rejected)
    conn.execute(_V6_REJECTIONS)


_V7_TURN_LEARNING = """
-- The turns waiting to be learned, found without reading every episode's JSON (core.store.turn_learning's query
-- repeats this WHERE word for word: SQLite uses a partial index only then).
CREATE INDEX episodes_learning_pending ON episodes(created_at, id)
    WHERE json_extract(metadata, '$.learning') = 'pending' AND deleted_at IS NULL AND forgotten_at IS NULL;

-- Who is learning a turn now (claimed in one write transaction: two learners never learn it twice), how many
-- tries it took and the last error. A row lives while the turn waits or after its learning was given up.
CREATE TABLE turn_learning(
    episode_id INTEGER PRIMARY KEY REFERENCES episodes(id) ON DELETE CASCADE,
    owner TEXT,                               -- 'host:pid:token' of the learner holding it; NULL: nobody
    claimed_at REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    retry_at REAL                             -- after a failure, the idle pass waits until then
);
"""


def v7_turn_learning(conn: apsw.Connection) -> None:
    conn.execute(_V7_TURN_LEARNING)


def v8_reply_drew_on(conn: apsw.Connection) -> None:
    """Which of a reply's context memories it drew on (core.memory.attribution): 1 drew on, 0 only recalled, NULL
    for replies stored before Engram told the two apart."""
    conn.execute("ALTER TABLE reply_memories ADD COLUMN drew_on INTEGER")


_V9_SENTENCES = """
-- A turn's sentences with a vector each (core.memory.sentences): offsets into its user_text (the text is never
-- stored twice) and the float vector, made by the store's embedder. Derived data, gone with its turn.
CREATE TABLE episode_sentences(
    id INTEGER PRIMARY KEY,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    span_start INTEGER NOT NULL,
    span_end INTEGER NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX episode_sentences_episode ON episode_sentences(episode_id);
-- The turns written before this version get their sentences in idle time, newest first, below this id.
INSERT INTO meta(key, value) SELECT 'sentences_backfill_below', max(id) + 1 FROM episodes HAVING count(*) > 0;
"""


def v9_sentences(conn: apsw.Connection) -> None:
    conn.execute(_V9_SENTENCES)


_V10_REPLY_TURNS = """
-- Which earlier conversation turns each reply quoted in its context (the "From earlier conversations" row under a
-- reply), in context order, with recall's reason and whether the reply drew on them. Gone with either turn.
CREATE TABLE reply_turns(
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,  -- the reply
    turn_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,     -- the earlier turn it quoted
    rank INTEGER NOT NULL,                    -- position among the quoted turns, 0 first
    why TEXT NOT NULL DEFAULT '',             -- recall's reason, as `engram memory search` words it
    drew_on INTEGER,                          -- 1 the reply drew on it (core.memory.attribution), 0 only quoted
    PRIMARY KEY (episode_id, turn_id)
) WITHOUT ROWID;
CREATE INDEX reply_turns_turn ON reply_turns(turn_id);
"""


def v10_reply_turns(conn: apsw.Connection) -> None:
    conn.execute(_V10_REPLY_TURNS)


def v11_history_by_action(conn: apsw.Connection) -> None:
    """The pins made since the last look (core.memory.recall_learning.collect_pins, after every turn, in `engram
    recall-weights` and Settings) are found by this index; without it each look read every history row, which
    hold whole snapshots (100k memories: 267 MB of the store, 71 ms). Building it there: 0.07 s."""
    conn.execute("CREATE INDEX memory_history_action ON memory_history(action, id)")
