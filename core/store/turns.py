"""Per-reply attribution (migration 3, table reply_memories): which memories a reply used, rated, vetoed."""
from __future__ import annotations

import json
from typing import Any, Collection, Iterable, Sequence

from core.store.db import Database
from core.store.text import clean_text
from core.types import EpisodeId, MemoryId


def record_used(db: Database, episode_id: int, used: Sequence[tuple[int, float, bool]],
                drew_on: Collection[int] | None = None) -> None:
    """Store (memory id, score, critical) in context order, and which of them the reply drew on (None: not
    known); a re-answer keeps the earlier vetoes."""
    ids = [int(m) for m, _, _ in used]
    marks = ",".join("?" * len(ids)) or "NULL"
    db.execute(f"DELETE FROM reply_memories WHERE episode_id = ? AND vetoed_at IS NULL AND memory_id NOT IN ({marks})",
               [int(episode_id), *ids])
    drawn = None if drew_on is None else {int(i) for i in drew_on}
    for rank, (memory_id, score, critical) in enumerate(used):
        db.execute("INSERT INTO reply_memories(episode_id, memory_id, rank, score, critical, drew_on) "
                   "VALUES (?,?,?,?,?,?) ON CONFLICT(episode_id, memory_id) DO UPDATE SET rank = excluded.rank, "
                   "score = excluded.score, critical = excluded.critical, useful = NULL, drew_on = excluded.drew_on",
                   (int(episode_id), int(memory_id), rank, float(score), int(bool(critical)),
                    None if drawn is None else int(int(memory_id) in drawn)))


def mark_drew_on(db: Database, episode_id: int, memory_ids: Iterable[int]) -> None:
    """The usefulness rating found the reply used these in other words: it drew on them after all."""
    for memory_id in memory_ids:
        db.execute("UPDATE reply_memories SET drew_on = 1 WHERE episode_id = ? AND memory_id = ?",
                   (int(episode_id), int(memory_id)))


def used_rows(db: Database, episode_id: int) -> list[dict[str, Any]]:
    """The memories a reply used, in context order, with their current statement."""
    return db.query("SELECT r.*, m.statement FROM reply_memories r JOIN memories m ON m.id = r.memory_id "
                    "WHERE r.episode_id = ? ORDER BY r.rank", (int(episode_id),))


def used_memory_ids(db: Database, episode_id: int, *, include_vetoed: bool = False) -> list[MemoryId]:
    return [MemoryId(r["memory_id"]) for r in used_rows(db, episode_id)
            if include_vetoed or r["vetoed_at"] is None]


def replies_using(db: Database, memory_id: int) -> list[EpisodeId]:
    """The replies that put a memory in their context, newest first."""
    return [EpisodeId(r[0]) for r in db.execute(
        "SELECT episode_id FROM reply_memories WHERE memory_id = ? ORDER BY episode_id DESC", (int(memory_id),))]


def kept_by_replies(db: Database, limit: int | None = None) -> list[tuple[MemoryId, float]]:
    """The memories the user's replies used and the user kept: used (an access count, as Assistant.finish records
    the memories a reply drew on, or an undo of their forgetting), and neither vetoed nor rated useless
    in the latest reply that used them; each with its last use, the newest `limit` (None: all) first. What the user
    asked about and found: forgetting counts it as wanted (core.memory.preference)."""
    return [(MemoryId(r[0]), float(r[1])) for r in db.execute(
        "SELECT m.id, m.last_access FROM memories m WHERE m.access_count > 0 AND m.last_access IS NOT NULL "
        "AND m.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM reply_memories r WHERE r.memory_id = m.id "
        "AND (r.vetoed_at IS NOT NULL OR r.useful = 0) AND r.episode_id = "
        "(SELECT max(q.episode_id) FROM reply_memories q WHERE q.memory_id = m.id)) "
        "ORDER BY m.last_access DESC, m.id DESC LIMIT ?", (-1 if limit is None else int(limit),))]


def used_turns(db: Database, limit: int | None = None) -> list[tuple[EpisodeId, float]]:
    """The earlier turns replies drew on (an access count, as Assistant.finish records them with touch_episodes,
    or an undo of their forgetting), each with its last use, the newest `limit` (None: all) first."""
    return [(EpisodeId(r[0]), float(r[1])) for r in db.execute(
        "SELECT id, last_access FROM episodes WHERE access_count > 0 AND last_access IS NOT NULL "
        "AND deleted_at IS NULL ORDER BY last_access DESC, id DESC LIMIT ?", (-1 if limit is None else int(limit),))]


def set_useful(db: Database, episode_id: int, rated: Iterable[int], useful: Iterable[int]) -> None:
    chosen = {int(i) for i in useful}
    for memory_id in rated:
        db.execute("UPDATE reply_memories SET useful = ? WHERE episode_id = ? AND memory_id = ?",
                   (int(int(memory_id) in chosen), int(episode_id), int(memory_id)))


def mark_vetoed(db: Database, episode_id: int, memory_id: int, at: float) -> None:
    db.execute("UPDATE reply_memories SET vetoed_at = ?, useful = 0 WHERE episode_id = ? AND memory_id = ?",
               (at, int(episode_id), int(memory_id)))


def touch_episodes(db: Database, episode_ids: Iterable[int], *, at: float) -> None:
    """Earlier turns a reply drew on were used once more (KenLM access counts; core.memory.attribution)."""
    ids = sorted({int(i) for i in episode_ids})
    if ids:
        marks = ",".join("?" * len(ids))
        db.execute(f"UPDATE episodes SET access_count = access_count + 1, last_access = ? WHERE id IN ({marks})",
                   [at, *ids])


REJECTED_KEPT = 3  # the newest replies a user regenerated away, kept as the rejected side of a preference pair
EARLIER_KEPT = 5  # earlier answers of a turn kept after Regenerate (the newest)


def replace_reply(db: Database, episode_id: int, reply_text: str, finish_reason: str | None, *,
                  rejected: bool = False) -> None:
    """A re-answer (after a veto, or the user's Regenerate) replaces the reply text of its episode; the vector is
    rewritten by learn. The replaced answer stays one click away (Regenerate's ‹ ›). `rejected`: the user asked for
    another answer, so the replaced one is also the rejected side of a preference pair (core.finetune.dataset learns
    the kept one over it). Both go with the episode."""
    reply_text = clean_text(reply_text, "reply", allow_empty=True)
    row = db.query_one("SELECT metadata, assistant_text FROM episodes WHERE id = ?", (int(episode_id),))
    metadata = json.loads((row["metadata"] if row else None) or "{}")
    before = (row["assistant_text"] if row else None) or ""
    earlier = [*metadata.get("earlier_replies", []), before][-EARLIER_KEPT:]
    metadata.update(finish_reason=finish_reason, reanswered=int(metadata.get("reanswered", 0)) + 1,
                    earlier_replies=[t for t in earlier if t])
    if rejected and before.strip():
        metadata["rejected_replies"] = [*metadata.get("rejected_replies", []), before][-REJECTED_KEPT:]
    db.execute("UPDATE episodes SET assistant_text = ?, metadata = ? WHERE id = ?",
               (reply_text, json.dumps(metadata, ensure_ascii=False), int(episode_id)))


# A reply that went round in a loop or wrote out the prompt's notes (core.prompt_echo) was the model failing.
FAILED_REPLIES = ("repetition", "echo")


def unquoted_replies(db: Database, episode_ids: Iterable[int]) -> dict[int, tuple[str, str]]:
    """id → (speaker, user_text) of the turns among these whose reply is not quoted back to the model when the turn
    is recalled: it failed (FAILED_REPLIES) or the user rated it poor. A weak model's garbage would otherwise come
    back as a memory and be copied into the next reply (a real 135M model did, language and all)."""
    ids = sorted({int(i) for i in episode_ids})
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    failed = ",".join("?" * len(FAILED_REPLIES))
    rows = db.execute(f"SELECT id, speaker, user_text FROM episodes WHERE id IN ({marks}) AND assistant_text != '' "
                      f"AND (rating = -1 OR json_extract(metadata, '$.finish_reason') IN ({failed}))",
                      [*ids, *FAILED_REPLIES]).fetchall()
    return {EpisodeId(int(i)): (str(speaker), str(text)) for i, speaker, text in rows}


def record_quoted(db: Database, episode_id: int, quoted: Sequence[tuple[int, str]],
                  drew_on: Collection[int]) -> None:
    """Store (earlier turn id, recall's reason) in context order for a reply, and which the reply drew on; a
    re-answer's quoted turns replace the earlier answer's."""
    db.execute("DELETE FROM reply_turns WHERE episode_id = ?", (int(episode_id),))
    drawn = {int(i) for i in drew_on}
    for rank, (turn_id, why) in enumerate(quoted):
        if int(turn_id) != int(episode_id):  # a turn never quotes itself; a regenerate could recall its own text
            db.execute("INSERT OR IGNORE INTO reply_turns(episode_id, turn_id, rank, why, drew_on) VALUES (?,?,?,?,?)",
                       (int(episode_id), int(turn_id), rank, str(why), int(int(turn_id) in drawn)))


def said_at(db: Database, episode_ids: Iterable[int]) -> dict[int, float]:
    """id → when the turn was said, for these turns (a recalled turn is quoted with its day)."""
    ids = sorted({int(i) for i in episode_ids})
    if not ids:
        return {}
    rows = db.execute(f"SELECT id, created_at FROM episodes WHERE id IN ({','.join('?' * len(ids))})", ids)
    return {EpisodeId(int(i)): float(at) for i, at in rows}
def last_recalled(db: Database) -> dict[MemoryId, float]:
    """When each memory was last recalled for a reply (in its context, drawn on or not, not vetoed)."""
    rows = db.execute("SELECT r.memory_id, max(e.created_at) FROM reply_memories r JOIN episodes e "
                      "ON e.id = r.episode_id WHERE r.vetoed_at IS NULL GROUP BY r.memory_id")
    return {MemoryId(int(r[0])): float(r[1]) for r in rows}
