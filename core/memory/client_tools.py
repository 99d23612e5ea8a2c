"""What another app may do with the memory once the user granted it (core.clients): the verbs behind the MCP tools.

Reading is search (recall, as a chat turn runs it, memories only) and list (active memories, most important first).
Writing needs a read-write grant, and even then a client never changes or removes a memory that is critical,
protected or pinned — those are the user's own decisions — and a memory it adds is an ordinary one, never critical,
pinned or protected. A client's text is data like a paste: it is stored as a memory's words, never as an
instruction. Every call is logged for the user to see (core.clients.AccessLog), refusals included.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.clients import AccessLog, Client
from core.errors import InvalidInput
from core.memory.manage import MemoryManager
from core.memory.recall import recall
from core.protocols import Embedder
from core.store.db import Database

MAX_RESULTS = 50
MAX_QUERY_CHARS = 2_000
MAX_STATEMENT_CHARS = 2_000


@dataclass(frozen=True)
class ClientMemory:
    id: int
    statement: str
    confidence: float
    updated_at: float

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "statement": self.statement, "confidence": round(self.confidence, 2),
                "updated_at": self.updated_at}


class ClientTools:
    def __init__(self, db: Database, embedder: Embedder, client: Client, log: AccessLog) -> None:
        self.db, self.embedder, self.client, self.log = db, embedder, client, log

    def search(self, query: str, limit: int = 10) -> list[ClientMemory]:
        query, limit = _text(query, "query", MAX_QUERY_CHARS), _limit(limit)
        found = recall(self.db, self.embedder, query, k=limit, kinds=("memory",))
        rows = [row for row in map(self._found, found.ids("memory")) if row is not None]
        self.log.record(self.client.name, "read", len(rows), f"search: {query[:80]}")
        return rows

    def list(self, limit: int = 20) -> list[ClientMemory]:
        limit = _limit(limit)
        rows = [ClientMemory(r["id"], r["statement"], r["confidence"], r["updated_at"]) for r in self.db.query(
            "SELECT id, statement, confidence, updated_at FROM active_memories WHERE kind <> 'summary' "
            "ORDER BY importance DESC, updated_at DESC LIMIT ?", (limit,))]
        self.log.record(self.client.name, "read", len(rows), "list")
        return rows

    def add(self, statement: str) -> ClientMemory:
        self._writable("add a memory")
        statement = _text(statement, "statement", MAX_STATEMENT_CHARS)
        added = MemoryManager(self.db, self.embedder).remember(statement, reason=f"added by {self.client.name}")
        self.log.record(self.client.name, "added", 1, f"#{added.memory.id}")
        return self._memory(added.memory.id)

    def edit(self, memory_id: int, statement: str) -> ClientMemory:
        self._writable("edit a memory")
        statement = _text(statement, "statement", MAX_STATEMENT_CHARS)
        self._changeable(memory_id, "edit")
        MemoryManager(self.db, self.embedder).edit(int(memory_id), statement=statement,
                                                   reason=f"edited by {self.client.name}")
        self.log.record(self.client.name, "edited", 1, f"#{memory_id}")
        return self._memory(int(memory_id))

    def forget(self, memory_id: int) -> str:
        self._writable("forget a memory")
        self._changeable(memory_id, "forget")
        MemoryManager(self.db).delete(int(memory_id), reason=f"forgotten by {self.client.name}")
        self.log.record(self.client.name, "forgot", 1, f"#{memory_id}")
        return f"memory {memory_id} moved to the trash (the user can restore it)"

    def _writable(self, what: str) -> None:
        if not self.client.can_write:
            self.log.record(self.client.name, "refused", 0, what)
            raise InvalidInput(f"{self.client.name} may only read the memory; the user can allow writes with "
                               f"`engram clients grant {self.client.name!r} --write`")

    def _changeable(self, memory_id: Any, verb: str) -> None:
        row = self.db.query_one("SELECT critical, protected, pinned FROM active_memories WHERE id = ?",
                                (_id(memory_id),))
        if row is None:
            raise InvalidInput(f"no memory {memory_id} to {verb}")
        if row["critical"] or row["protected"] or row["pinned"]:
            self.log.record(self.client.name, "refused", 0, f"{verb} #{memory_id} (critical, protected or pinned)")
            raise InvalidInput(f"memory {memory_id} is critical, protected or pinned: only the user can {verb} it")

    def _memory(self, memory_id: int) -> ClientMemory:
        found = self._found(memory_id)
        if found is None:  # written a moment ago; gone only if another process removed it meanwhile
            raise InvalidInput(f"memory {memory_id} is no longer in the store")
        return found

    def _found(self, memory_id: int) -> ClientMemory | None:
        row = self.db.query_one("SELECT id, statement, confidence, updated_at FROM active_memories WHERE id = ?",
                                (int(memory_id),))
        return None if row is None else ClientMemory(row["id"], row["statement"], row["confidence"],
                                                     row["updated_at"])


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} must be non-empty text")
    if len(value) > limit:
        raise InvalidInput(f"{what} is too long ({len(value):,} characters; the limit is {limit:,})")
    return value.strip()


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RESULTS:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_RESULTS}")
    return value


def _id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput("a memory id is a positive whole number")
    return value
