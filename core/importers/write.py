"""Writing an import into the store: sessions and turns with their original times, embedded as they are written.

- Every imported turn's episode says where it came from in its metadata ("imported": source, key, conversation,
  batch, label), and waits to be learned from in idle time ("learning": "pending") like a chat turn left unlearned:
  the turn learner reads the person's own words with the plain-statement learner before any model, and learns turns
  in the order they were said, so a later "I moved to Porto" closes an earlier Lisbon and never the reverse.
- Idempotent: a turn whose key the store already holds (even in the trash: the user removed it) is not added again;
  a conversation that grew since the last export gets only its new turns, in its existing session.
- Resumable: turns are written in chunks, each chunk embedded first and then written with its vectors in one
  transaction. A kill loses at most the chunk being written, and importing the same file again adds the rest.
  Each turn gets its own vector at import; its sentences' vectors come in idle time (core.memory.index
  .index_turn_vectors), which makes the import 5–10× less embedding.
- Imported sessions are marked reflected: reflecting on years of history would queue thousands of model runs ahead
  of today's conversations; what they say is learned turn by turn instead.
- A memory list becomes memories whose source is one episode holding the list, so every memory names where it came
  from, and removing the import (undo_batch) finds them.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from core.importers.conversations import ImportedConversation, Parsed, source_label
from core.memory import index
from core.protocols import Embedder
from core.store import episodes, memories, sessions, vectors
from core.store.db import Database

CHUNK_TURNS = 256  # turns embedded, then written, at a time: a short transaction, and little lost to a kill
Progress = Callable[[int, int], None]  # (turns written so far, turns to write)


@dataclass
class ImportReport:
    source: str
    batch: str
    conversations: int = 0  # conversations that gained at least one turn
    turns: int = 0  # turns written now
    already: int = 0  # turns the store already held
    memories: int = 0
    memories_already: int = 0
    skipped: Counter = field(default_factory=Counter)
    stopped: bool = False


def batch_id(source: str, content_digest: str) -> str:
    """One import of one file: the same file imported again (or resumed) is the same batch."""
    return f"{source}-{content_digest[:12]}"


def import_parsed(db: Database, embedder: Embedder, parsed: Parsed, *, batch: str, progress: Progress | None = None,
                  stop: Callable[[], bool] | None = None) -> ImportReport:
    report = ImportReport(parsed.source, batch, skipped=Counter(parsed.skipped))
    known, sessions_of = _imported_keys(db)
    todo = [(c, [t for t in c.turns if t.key not in known]) for c in parsed.conversations]
    report.already = sum(len(c.turns) - len(new) for c, new in todo)
    todo = sorted(((c, new) for c, new in todo if new), key=lambda item: -item[0].created_at)  # newest first
    total = sum(len(new) for _, new in todo)
    for chunk in _chunks(todo):
        if stop is not None and stop():
            report.stopped = True
            break
        _write_chunk(db, embedder, parsed.source, batch, chunk, sessions_of)
        report.conversations += sum(1 for _ in chunk)
        report.turns += sum(len(new) for _, new in chunk)
        if progress is not None:
            progress(report.turns, total)
    if parsed.memories and not report.stopped:
        report.memories, report.memories_already = _import_memories(db, embedder, parsed, batch)
    if report.turns or report.memories:
        vectors.upkeep(db)  # a bulk write leaves the partitions it filled unpacked
    return report


def _imported_keys(db: Database) -> tuple[set[str], dict[str, int]]:
    keys: set[str] = set()
    sessions_of: dict[str, int] = {}
    for key, conversation, session_id in db.execute(
            "SELECT json_extract(metadata, '$.imported.key'), json_extract(metadata, '$.imported.conversation'), "
            "session_id FROM episodes WHERE json_extract(metadata, '$.imported.key') IS NOT NULL"):
        keys.add(key)
        if conversation and session_id is not None:
            sessions_of[conversation] = session_id
    return keys, sessions_of


def _chunks(todo: Sequence[tuple[ImportedConversation, list]]) -> Iterable[list[tuple[ImportedConversation, list]]]:
    chunk, size = [], 0
    for conversation, new in todo:
        chunk.append((conversation, new))
        size += len(new)
        if size >= CHUNK_TURNS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _write_chunk(db: Database, embedder: Embedder, source: str, batch: str,
                 chunk: list[tuple[ImportedConversation, list]], sessions_of: dict[str, int]) -> None:
    texts = [index.episode_text(index.UnsavedTurn(speaker="user", user_text=turn.user_text,
                                                  assistant_text=turn.assistant_text))
             for _, new in chunk for turn in new]
    ready = index.Precomputed.of(embedder, texts)  # seconds of embedding, before the write lock

    def write() -> None:
        with db.transaction():
            written = []
            for conversation, new in chunk:
                session_id = sessions_of.get(conversation.key) or _new_session(db, conversation)
                for turn in new:
                    written.append(episodes.add_episode(
                        db, turn.user_text, turn.assistant_text, session_id=session_id, created_at=turn.created_at,
                        metadata={"imported": {"from": source, "key": turn.key, "conversation": conversation.key,
                                               "batch": batch, "label": source_label(source, turn.created_at)},
                                  "learning": "pending"}))
                _close_session(db, session_id)
                sessions_of[conversation.key] = session_id
            index.index_turn_vectors(db, ready, written)  # sentences: in idle time (index_sentence_backlog)

    db.retrying(write)


def _new_session(db: Database, conversation: ImportedConversation) -> int:
    return sessions.create_session(db, conversation.title, created_at=conversation.created_at)


def _close_session(db: Database, session_id: int) -> None:
    """Its time span is its turns', it has ended, and reflection will not queue it (the module's docstring)."""
    db.execute("UPDATE sessions SET updated_at = coalesce((SELECT max(created_at) FROM episodes WHERE session_id = "
               ":s), updated_at), ended_at = coalesce((SELECT max(created_at) FROM episodes WHERE session_id = :s), "
               "created_at), reflected_at = :now WHERE id = :s", {"s": int(session_id), "now": db.now()})


def _import_memories(db: Database, embedder: Embedder, parsed: Parsed, batch: str) -> tuple[int, int]:
    active = {row[0].strip().casefold() for row in db.execute(
        "SELECT statement FROM active_memories")}
    new = [line for line in parsed.memories if line.strip().casefold() not in active]
    if not new:
        return 0, len(parsed.memories)
    label = source_label(parsed.source, db.now())
    listing = "\n".join(f"- {line}" for line in new)
    key = "memories:" + hashlib.sha256(listing.encode("utf-8")).hexdigest()[:24]
    ready = index.Precomputed.of(embedder, [*new, *index.episode_texts(
        index.UnsavedTurn(speaker="user", user_text=listing, assistant_text=""))])

    def write() -> int:
        with db.transaction():
            session_id = sessions.create_session(db, f"Memories {label}")
            episode_id = episodes.add_episode(db, listing, session_id=session_id, metadata={
                "imported": {"from": parsed.source, "key": key, "conversation": key, "batch": batch,
                             "label": label, "memory_list": True},
                "learning": "done"})  # its lines are the memories below: nothing to learn twice
            made = [memories.add_memory(db, line, source_episode_ids=[episode_id], confidence=0.8,
                                        reason=f"{label} (a memory list)") for line in new]
            index.index_episodes(db, ready, [episode_id])
            index.index_memories(db, ready, made)
            _close_session(db, session_id)
        return len(made)

    return db.retrying(write), len(parsed.memories) - len(new)


def digest_file(path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


def metadata_of(raw: str) -> dict:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
