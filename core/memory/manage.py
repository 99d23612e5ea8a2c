"""Hand edits: everything a person can do to what Engram remembers, as one facade over db + embedder.

Each edit is one transaction that also keeps the vector index in step and leaves a history row,
so the GUI and the CLI share one set of rules.
"""
from __future__ import annotations

import builtins
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from core.errors import InvalidInput, WorkStopped
from core.memory import index, rejected
from core.protocols import Embedder
from core.store import (backups, entities, episodes, export, files, history, memories, rejections, sentences,
                        vectors, wipe)
from core.store.db import Database
from core.store.text import clean_text
from core.types import Episode, HistoryEntry, Memory

MAX_IMPORT_BYTES = 512 * 1024 * 1024
REEMBED_BATCH = 256  # sentences embedded between two looks at `stop`
SAID_OUTRIGHT = 0.9  # the confidence of a memory the user adds by hand (`engram memory add`, Add a memory…)
RESTATE_STEP = 0.1  # saying a remembered fact again makes it this much more certain (as reconcile's duplicate does)


@dataclass(frozen=True)
class MemoryDetails:
    memory: Memory
    history: list[HistoryEntry]
    entities: list[tuple[str, str]]  # (name, role)


@dataclass(frozen=True)
class PurgeResult:
    memories: int
    episodes: int
    backups_removed: int = 0  # upgrade backups that still held a purged text
    scrub_pending: bool = False  # another process is reading: the WAL's old copies go when it closes


@dataclass(frozen=True)
class Added:
    memory: Memory
    existed: bool  # the statement was already remembered: its confidence rose instead of a copy being added


def normalised(statement: str) -> str:
    """What counts as "the same statement": case, spacing and a final full stop do not."""
    return " ".join(statement.split()).casefold().rstrip(".!")


def _like_escaped(word: str) -> str:
    """A word of a LIKE pattern: % and _ literal, each character beyond ASCII any run of characters."""
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return "".join(c if c.isascii() else "%" for c in escaped)


def _full_text_words(wanted: str) -> str:
    """An FTS5 query for every word of an ASCII statement ("" otherwise: the LIKE scan decides alone). An ASCII
    row with the same normalised text has the same letter-and-digit runs, which are unicode61's tokens there."""
    if not wanted.isascii():
        return ""
    return " ".join(f'"{word}"' for word in re.findall(r"[0-9a-z]+", wanted))


@dataclass
class MemoryManager:
    db: Database
    embedder: Embedder | None = None  # only adding, editing, importing and re-embedding need one

    def _embedder(self) -> Embedder:
        if self.embedder is None:
            raise ValueError("this MemoryManager was built without an embedder; pass one to write vectors")
        return self.embedder

    # --- memories ---------------------------------------------------------------------------------------
    def add(self, statement: str, *, pinned: bool = False, protected: bool = False, reason: str = "",
            **fields: Any) -> Memory:
        """The memory holding `statement`: a new one, or the active one already saying it (see `remember`)."""
        return self.remember(statement, pinned=pinned, protected=protected, reason=reason, **fields).memory

    def remember(self, statement: str, *, pinned: bool = False, protected: bool = False, reason: str = "",
                 **fields: Any) -> Added:
        """Write the row and its vector together: either both exist afterwards or neither does. An active
        memory with the same normalised statement is not copied: it becomes more certain and is returned.

        The vector is made first, so the write transaction lasts milliseconds and another process can write
        beside this one; a busy store is retried (Database.retrying)."""
        cleaned = clean_text(statement, "statement")
        same = self._active_with_statement(cleaned)
        if same is not None:
            return Added(self._restate(same, fields.get("confidence"), pinned, protected, reason), existed=True)
        ready = index.Precomputed.of(self._embedder(), [cleaned])

        def write() -> int:
            with self.db.transaction():
                memory_id = memories.add_memory(self.db, statement, reason=reason, **fields)
                if pinned:
                    memories.set_flag(self.db, memory_id, "pinned", True, reason)
                if protected:
                    memories.set_flag(self.db, memory_id, "protected", True, reason)
                index.index_memories(self.db, ready, [memory_id])
                # added by hand: the user says it holds, whatever they rejected before
                rejections.lift_keys(self.db, rejected.keys_of(
                    statement, fields.get("subject") or "", fields.get("relation") or "", fields.get("object") or ""))
            return memory_id

        return Added(memories.get_memory(self.db, self.db.retrying(write)), existed=False)

    def _active_with_statement(self, statement: str) -> Memory | None:
        wanted = normalised(statement)
        # SQLite narrows it down in C, Python decides. LIKE ignores ASCII case only, so a letter beyond ASCII
        # matches anything (Évora was never found again as évora); % spans any spacing.
        pattern = "%".join(_like_escaped(w) for w in wanted.split()) + "%"
        words = _full_text_words(wanted)
        if words:  # the full-text index finds the rows holding every word: no scan of every memory's text
            rows = self.db.query("SELECT id, statement FROM active_memories WHERE id IN (SELECT rowid FROM "
                                 "memories_fts WHERE memories_fts MATCH ?) AND statement LIKE ? ESCAPE '\\' "
                                 "ORDER BY id", (words, pattern))
        else:
            rows = self.db.query("SELECT id, statement FROM active_memories WHERE statement LIKE ? ESCAPE '\\' "
                                 "ORDER BY id", (pattern,))
        found = next((r["id"] for r in rows if normalised(r["statement"]) == wanted), None)
        return None if found is None else memories.get_memory(self.db, found)

    def _restate(self, memory: Memory, confidence: float | None, pinned: bool, protected: bool,
                 reason: str) -> Memory:
        raised = min(1.0, max(memory.confidence + RESTATE_STEP, float(confidence or 0.0)))

        def write() -> Memory:
            with self.db.transaction():
                memories.update_memory(self.db, memory.id, confidence=raised,
                                       reason=f"said again{': ' + reason if reason else ''}")
                for flag, wanted in (("pinned", pinned), ("protected", protected)):
                    if wanted and not getattr(memory, flag):
                        memories.set_flag(self.db, memory.id, flag, True, reason)
            return memories.get_memory(self.db, memory.id)

        return self.db.retrying(write)

    def edit(self, memory_id: int, *, reason: str = "", **changes: Any) -> Memory:
        """Change text or fields; the old version stays in history and the vector is remade (made first, outside
        the write transaction, as in `add`)."""
        statement = changes.get("statement")
        if statement is not None and not {"subject", "relation", "object"} & set(changes):
            from core.memory.edit_triple import triple_of  # deferred, as `replaced` is
            derived = triple_of(statement)  # the edit reaches the fact, not only its words
            if derived is not None:
                changes = {**changes, "subject": derived[0], "relation": derived[1], "object": derived[2]}
        ready = None
        if statement is not None and self.embedder is not None:
            ready = index.Precomputed.of(self.embedder, [clean_text(statement, "statement")])

        def write() -> Memory:
            with self.db.transaction():
                before = memories.get_memory(self.db, memory_id)
                after = memories.update_memory(self.db, memory_id, reason=reason, **changes)
                if index.memory_text(after) != index.memory_text(before):
                    index.index_memories(self.db, ready or self._embedder(), [after.id])
            return after

        return self.db.retrying(write)

    def pin(self, memory_id: int, reason: str = "") -> Memory:
        return memories.set_flag(self.db, memory_id, "pinned", True, reason)

    def unpin(self, memory_id: int, reason: str = "") -> Memory:
        return memories.set_flag(self.db, memory_id, "pinned", False, reason)

    def protect(self, memory_id: int, reason: str = "") -> Memory:
        return memories.set_flag(self.db, memory_id, "protected", True, reason)

    def unprotect(self, memory_id: int, reason: str = "") -> Memory:
        return memories.set_flag(self.db, memory_id, "protected", False, reason)

    def delete(self, memory_id: int, reason: str = "") -> Memory:
        """To the trash: out of recall, restorable until purged; a fact it had replaced holds again."""
        from core.memory import replaced  # deferred: its statement patterns take 0.14 s to compile
        return replaced.trash(self.db, memory_id, reason)

    def reject(self, memory_id: int, reason: str = "") -> Memory:
        """"This is wrong": to the trash like `delete`, and learning will not keep the same fact again."""
        return rejected.reject(self.db, memory_id, reason or "you said this is wrong")

    def restore(self, memory_id: int, reason: str = "") -> Memory:
        """Back from the trash; what its removal had reopened is closed again (core.memory.replaced)."""
        from core.memory import replaced  # deferred: its statement patterns take 0.14 s to compile
        return replaced.restore(self.db, memory_id, reason)

    def invalidate(self, memory_id: int, *, superseded_by: int | None = None, reason: str = "") -> Memory:
        return memories.invalidate_memory(self.db, memory_id, superseded_by=superseded_by, reason=reason)

    def get(self, memory_id: int) -> Memory:
        return memories.get_memory(self.db, memory_id)

    def show(self, memory_id: int) -> MemoryDetails:
        memory = memories.get_memory(self.db, memory_id)
        linked = [(entity.name, role) for entity, role in entities.entities_of(self.db, memory.id)]
        return MemoryDetails(memory, history.history(self.db, memory.id), linked)

    def list(self, *, kind: str | None = None, pinned: bool | None = None, protected: bool | None = None,
             critical: bool | None = None, status: str | None = "active", limit: int = 100,
             offset: int = 0) -> list[Memory]:
        return memories.list_memories(self.db, kind=kind, pinned=pinned, protected=protected, critical=critical,
                                      status=status, limit=limit, offset=offset)

    def purge(self, memory_ids: Sequence[int] | None = None, episode_ids: Sequence[int] | None = None,
              reason: str = "") -> PurgeResult:
        """Hard delete trashed rows (everything in the trash when no ids are given); the text leaves the file.

        secure_delete zeroes freed pages and FTS5 secure-delete drops the index terms; the WAL is then
        checkpointed and truncated so no older copy of a page is left in the -wal file.
        """
        if memory_ids is None and episode_ids is None:
            memory_ids, episode_ids = memories.trashed_memory_ids(self.db), episodes.trashed_episode_ids(self.db)
        memory_ids, episode_ids = list(dict.fromkeys(memory_ids or ())), list(dict.fromkeys(episode_ids or ()))
        texts = self._texts_of(memory_ids, episode_ids)

        def write() -> tuple[int, int]:
            with self.db.transaction():
                return (memories.purge_memory_rows(self.db, memory_ids, reason),
                        episodes.purge_episode_rows(self.db, episode_ids))

        purged = self.db.retrying(write)
        if self.db.path.name == ":memory:":
            return PurgeResult(*purged)
        # The backups first: they do not wait for other readers, and a retry could no longer find the text.
        removed = backups.remove_backups_holding(self.db.path.parent / "backups", texts)
        clean = self.db.scrub_wal()
        return PurgeResult(*purged, backups_removed=len(removed), scrub_pending=not clean)

    # builtins.list: in this class, `list` names the method above
    def _texts_of(self, memory_ids: Sequence[int], episode_ids: Sequence[int]) -> builtins.list[str]:
        """What a purge erases, read first so the backups can be searched for it afterwards."""
        texts = [memories.get_memory(self.db, i).statement for i in memory_ids]
        for memory_id in memory_ids:  # the earlier wordings its history kept
            for entry in history.history(self.db, memory_id):
                texts += [str(v.get("statement", "")) for v in (entry.old_value, entry.new_value) if v]
        for episode in (episodes.get_episode(self.db, i) for i in episode_ids):
            texts += [episode.user_text, episode.assistant_text]
        return texts

    # --- episodes ---------------------------------------------------------------------------------------
    def protect_episode(self, episode_id: int) -> Episode:
        return episodes.set_episode_protected(self.db, episode_id, True)

    def unprotect_episode(self, episode_id: int) -> Episode:
        return episodes.set_episode_protected(self.db, episode_id, False)

    def delete_episode(self, episode_id: int) -> Episode:
        return episodes.trash_episode(self.db, episode_id)

    def restore_episode(self, episode_id: int) -> Episode:
        return episodes.restore_episode(self.db, episode_id)

    # --- whole store ------------------------------------------------------------------------------------
    def forget_everything(self) -> wipe.WipeResult:
        """Back up the store beside it, then erase what Engram knows about the user (core.store.wipe says what)."""
        if self.db.path.name == ":memory:":
            raise InvalidInput("this store lives in memory only: there is no file to back up before forgetting")
        return wipe.forget_everything(self.db, self.db.path.parent / "backups")

    def export_to(self, path: Path | str) -> dict[str, int]:
        """Write the export whole or not at all: a full disk never leaves a truncated file in place of a good one."""
        data = export.export_store(self.db)
        files.write_private_atomically(Path(path), export.dumps(data).encode("utf-8"))
        return {name: len(data[name]) for name in export.SECTIONS}

    def import_from(self, path: Path | str) -> export.ImportResult:
        """Check the whole file, then add it under new ids with fresh vectors, all in one transaction."""
        path = Path(path)
        if not path.is_file():
            raise InvalidInput(f"{path} is not a file")
        if path.stat().st_size > MAX_IMPORT_BYTES:
            raise InvalidInput(f"{path} is larger than {MAX_IMPORT_BYTES // 2**20} MB; refusing to import it")
        data = export.parse_export(path.read_bytes())
        ready = index.Precomputed.of(self._embedder(), index.export_texts(data))  # minutes: before the lock

        def write() -> export.ImportResult:
            with self.db.transaction():
                result = export.import_store(self.db, data)
                index.index_memories(self.db, ready, list(result.memories.values()))
                index.index_episodes(self.db, ready, list(result.episodes.values()))
            return result

        result = self.db.retrying(write)
        vectors.upkeep(self.db)  # an import writes in bulk, which leaves the partitions it filled unpacked
        return result

    def reembed(self, stop: Callable[[], bool] | None = None) -> int:
        """Remake every vector with this manager's embedder (after switching models); `stop` as vectors.reembed's."""
        embedder = self._embedder()
        ready = index.Precomputed(embedder)  # a turn's sentences: embedded before the lock too, stoppable
        said = [text for _, text in index.stored_sentence_texts(self.db)]
        for start in range(0, len(said), REEMBED_BATCH):
            if stop is not None and stop():
                raise WorkStopped("re-embedding stopped before any vector was changed")
            ready.embed(said[start:start + REEMBED_BATCH])

        def swap_sentences() -> None:  # inside the swap's transaction: sentences added meanwhile are embedded here
            rows = list(index.stored_sentence_texts(self.db))
            sentences.replace_vectors(self.db, zip((i for i, _ in rows), ready.embed([t for _, t in rows])))

        return vectors.reembed(self.db, embedder.name, embedder.dimension, self._texts, embedder.embed, stop=stop,
                               then=swap_sentences)

    def _texts(self, table: str) -> Iterable[tuple[int, str]]:
        if table == "memory":
            for row in self.db.query("SELECT * FROM memories ORDER BY id"):
                yield row["id"], index.memory_text(memories.row_to_memory(self.db, row, ()))
        else:
            for row in self.db.query("SELECT * FROM episodes ORDER BY id"):
                yield row["id"], index.episode_text(episodes.row_to_episode(row))
