"""A JSON export of the store that carries history, and its import (documented in docs/EXPORT_FORMAT.md).

Import checks the whole file before writing anything, gives every row a new id (so it never clobbers
rows already in the store) and writes everything in one transaction: a bad file imports nothing.
Sessions, episodes and memories carry a content key (`row_key`): a row whose key is already in the store is
not added again, so importing the same export twice adds nothing the second time.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from core.errors import InvalidInput
from core.store import entities, history
from core.store.db import Database
from core.store.text import MAX_INT, clean_text, clean_time
from core.types import HISTORY_ACTIONS, MEMORY_KINDS, EpisodeId, MemoryId, SessionId

FORMAT_NAME = "engram-export"
FORMAT_VERSION = 1
EDGE_KINDS = ("hebbian", "similarity", "supersedes", "summary")

# Each section's fields: name -> (kind, required). Kinds: text, text?, number, number?, int, id, id?, bool, ...
SESSION_FIELDS = {"id": ("id", True), "title": ("text?", False), "instructions": ("text?", False),
                  "created_at": ("time", True), "updated_at": ("time?", False), "ended_at": ("time?", False),
                  "reflected_at": ("time?", False), "deleted_at": ("time?", False)}
EPISODE_FIELDS = {"id": ("id", True), "session_id": ("id?", False), "user_text": ("text", True),
                  "assistant_text": ("text?", False), "speaker": ("text?", False), "created_at": ("time", True),
                  "access_count": ("int", False), "last_access": ("time?", False), "protected": ("bool", False),
                  "rating": ("rating", False), "summary_id": ("id?", False), "forgotten_at": ("time?", False),
                  "deleted_at": ("time?", False), "metadata": ("object", False)}
MEMORY_FIELDS = {"id": ("id", True), "statement": ("text", True), "subject": ("text?", False),
                 "relation": ("text?", False), "object": ("text?", False), "kind": ("kind", False),
                 "critical": ("bool", False), "confidence": ("unit", False), "importance": ("number", False),
                 "pinned": ("bool", False), "protected": ("bool", False), "permanent": ("bool", False),
                 "access_count": ("int", False), "last_access": ("time?", False), "created_at": ("time", True),
                 "updated_at": ("time?", False), "valid_from": ("time?", False), "valid_to": ("time?", False),
                 "invalidated_at": ("time?", False), "superseded_by": ("id?", False),
                 "forgotten_at": ("time?", False), "deleted_at": ("time?", False),
                 "source_episode_ids": ("ids", False)}
HISTORY_FIELDS = {"memory_id": ("id", True), "action": ("action", True), "old_value": ("object?", False),
                  "new_value": ("object?", False), "reason": ("text?", False), "at": ("time", True)}
EDGE_FIELDS = {"a_id": ("id", True), "b_id": ("id", True), "kind": ("edge_kind", False),
               "weight": ("number", False), "last_coactivated": ("time?", False), "created_at": ("time", True)}
SECTIONS = {"sessions": SESSION_FIELDS, "episodes": EPISODE_FIELDS, "memories": MEMORY_FIELDS,
            "history": HISTORY_FIELDS, "edges": EDGE_FIELDS}


KEYED = ("sessions", "episodes", "memories")


@dataclass
class ImportResult:
    """The rows added (file id -> new id), and the rows the store already had (file id -> its id there)."""
    sessions: dict[int, SessionId] = field(default_factory=dict)
    episodes: dict[int, EpisodeId] = field(default_factory=dict)
    memories: dict[int, MemoryId] = field(default_factory=dict)
    history_rows: int = 0
    edges: int = 0
    existing_sessions: dict[int, SessionId] = field(default_factory=dict)
    existing_episodes: dict[int, EpisodeId] = field(default_factory=dict)
    existing_memories: dict[int, MemoryId] = field(default_factory=dict)

    def session_ids(self) -> dict[int, SessionId]:
        return {**self.existing_sessions, **self.sessions}

    def episode_ids(self) -> dict[int, EpisodeId]:
        return {**self.existing_episodes, **self.episodes}

    def memory_ids(self) -> dict[int, MemoryId]:
        return {**self.existing_memories, **self.memories}


def row_key(section: str, row: Mapping[str, Any]) -> str:
    """A row's identity across stores, from what never changes about it: when it was made and its first words
    (a session by its title, an episode by what the user said, a memory by its kind and statement)."""
    if section == "sessions":
        parts = [row.get("title") or "", row.get("instructions") or ""]
    elif section == "episodes":
        parts = [row["user_text"]]
    else:
        parts = [row.get("kind") or "semantic", row["statement"]]
    text = json.dumps([section, float(row["created_at"]), *parts], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def export_store(db: Database) -> dict[str, Any]:
    """Everything a person would want to take with them: sessions, episodes, memories, history, edges."""
    memories = db.query("SELECT * FROM memories ORDER BY id")
    sources: dict[int, list[int]] = {}
    for memory_id, episode_id in db.execute("SELECT memory_id, episode_id FROM memory_sources ORDER BY 1, 2"):
        sources.setdefault(memory_id, []).append(episode_id)
    for row in memories:
        row["source_episode_ids"] = sources.get(row["id"], [])
        for flag in ("critical", "pinned", "protected", "permanent"):
            row[flag] = bool(row[flag])
    episodes = db.query("SELECT * FROM episodes ORDER BY id")
    for row in episodes:
        row["protected"] = bool(row["protected"])
        row["metadata"] = json.loads(row["metadata"])
    rows = db.query("SELECT * FROM memory_history WHERE memory_id IN (SELECT id FROM memories) ORDER BY id")
    for row in rows:
        del row["id"]
        row["old_value"], row["new_value"] = (_json_or_none(row["old_value"]), _json_or_none(row["new_value"]))
    embedder = {r["key"]: r["value"] for r in db.query(
        "SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dimension')")}
    sessions = db.query("SELECT * FROM sessions ORDER BY id")
    for section, keyed in (("sessions", sessions), ("episodes", episodes), ("memories", memories)):
        for row in keyed:
            row["key"] = row_key(section, row)
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "exported_at": db.now(),
            "schema_version": db.schema_version(), "embedder": embedder.get("embedder_name"),
            "sessions": sessions, "episodes": episodes,
            "memories": memories, "history": rows, "edges": db.query("SELECT * FROM edges ORDER BY a_id, b_id")}


def dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False)


def parse_export(raw: bytes | str) -> dict[str, Any]:
    """Decode and check an export file completely; InvalidInput names the first problem found."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"the export file is not valid UTF-8 (byte {exc.start})") from None
    try:
        data = json.loads(raw, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise InvalidInput(f"the export file is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise InvalidInput(f"not an Engram export (expected \"format\": \"{FORMAT_NAME}\")")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidInput("the export has no valid format version")
    if version > FORMAT_VERSION:
        raise InvalidInput(f"the export is format version {version}; this Engram reads up to {FORMAT_VERSION}")
    checked = {"format": FORMAT_NAME, "version": version}
    for section, fields in SECTIONS.items():
        items = data.get(section, [])
        if not isinstance(items, list):
            raise InvalidInput(f"{section} must be a list")
        checked[section] = [_check_row(f"{section}[{n}]", item, fields) for n, item in enumerate(items)]
    _check_references(checked)
    return checked


def import_store(db: Database, data: Mapping[str, Any]) -> ImportResult:
    """Add a parsed export to the store under new ids, in one transaction; rows already there are reused."""
    result = ImportResult()
    with db.transaction():
        have = _stored_keys(db)
        _import_episodes_and_sessions(db, data, have, result)
        for row in data["memories"]:
            known = have["memories"].get(row_key("memories", row))
            if known is not None:
                result.existing_memories[row["id"]] = MemoryId(known)
            else:
                result.memories[row["id"]] = MemoryId(_insert(db, "memories", _memory_values(row)))
        _link_memories(db, data, result)
        for row in data["history"]:
            if row["memory_id"] in result.memories:  # a memory already here keeps its own history
                history.record(db, result.memories[row["memory_id"]], row["action"], row.get("old_value"),
                               row.get("new_value"), row.get("reason") or "", at=row["at"])
                result.history_rows += 1
        for old, new in result.memories.items():
            history.record(db, new, "create", None, None, f"imported from an export (id {old} there)")
        ids = result.memory_ids()
        for row in data["edges"]:
            if row["a_id"] in result.memories or row["b_id"] in result.memories:
                result.edges += _insert_edge(db, row, ids)
    return result


def _stored_keys(db: Database) -> dict[str, dict[str, int]]:
    """The content key of every session, episode and memory in the store -> its id."""
    queries = {"sessions": "SELECT id, created_at, title, instructions FROM sessions",
               "episodes": "SELECT id, created_at, user_text FROM episodes",
               "memories": "SELECT id, created_at, kind, statement FROM memories"}
    return {section: {row_key(section, row): row["id"] for row in db.query(sql)} for section, sql in queries.items()}


def _import_episodes_and_sessions(db: Database, data: Mapping[str, Any], have: Mapping[str, dict[str, int]],
                                  result: ImportResult) -> None:
    known_episodes = {row["id"]: have["episodes"].get(row_key("episodes", row)) for row in data["episodes"]}
    # a session whose turns are already here is that conversation, even if it was renamed since
    session_of: dict[Any, Any] = {}
    for row in data["episodes"]:
        if known_episodes[row["id"]] is not None and row.get("session_id") is not None:
            stored = db.scalar("SELECT session_id FROM episodes WHERE id = ?", (known_episodes[row["id"]],))
            if stored is not None:
                session_of.setdefault(row["session_id"], stored)
    for row in data["sessions"]:
        known = session_of.get(row["id"]) or have["sessions"].get(row_key("sessions", row))
        if known is not None:
            result.existing_sessions[row["id"]] = SessionId(known)
        else:
            result.sessions[row["id"]] = SessionId(_insert(db, "sessions", _without(row, "id", "key")))
    sessions = result.session_ids()
    for row in data["episodes"]:
        known_episode = known_episodes[row["id"]]
        if known_episode is not None:
            result.existing_episodes[row["id"]] = EpisodeId(known_episode)
            continue
        values = _without(row, "id", "summary_id", "key")
        values["session_id"] = sessions.get(row.get("session_id"))
        values["metadata"] = json.dumps(row.get("metadata") or {}, ensure_ascii=False)
        result.episodes[row["id"]] = EpisodeId(_insert(db, "episodes", values))


def _link_memories(db: Database, data: Mapping[str, Any], result: ImportResult) -> None:
    episodes = result.episode_ids()
    for row in data["memories"]:
        new_id = result.memories.get(row["id"])
        if new_id is None:
            continue  # already in the store, with its own links
        for episode_id in row.get("source_episode_ids") or []:
            db.execute("INSERT OR IGNORE INTO memory_sources(memory_id, episode_id) VALUES (?, ?)",
                       (new_id, episodes[episode_id]))
        if row.get("superseded_by") is not None:
            db.execute("UPDATE memories SET superseded_by = ? WHERE id = ?",
                       (result.memory_ids()[row["superseded_by"]], new_id))
        entities.link_triple(db, new_id, row.get("subject") or "", row.get("object") or "")
    for row in data["episodes"]:
        if row.get("summary_id") is not None and row["id"] in result.episodes:
            db.execute("UPDATE episodes SET summary_id = ? WHERE id = ?",
                       (result.memory_ids()[row["summary_id"]], result.episodes[row["id"]]))


def _memory_values(row: Mapping[str, Any]) -> dict[str, Any]:
    values = _without(row, "id", "superseded_by", "source_episode_ids", "key")
    for flag in ("critical", "pinned", "protected", "permanent"):
        if flag in values:
            values[flag] = int(values[flag])
    values.setdefault("updated_at", row["created_at"])
    return values


def _insert_edge(db: Database, row: Mapping[str, Any], ids: Mapping[int, MemoryId]) -> int:
    a, b = sorted((ids[row["a_id"]], ids[row["b_id"]]))
    if a == b:
        return 0
    db.execute("INSERT OR REPLACE INTO edges(a_id, b_id, kind, weight, last_coactivated, created_at) "
               "VALUES (?, ?, ?, ?, ?, ?)", (a, b, row.get("kind") or "hebbian", row.get("weight") or 0.0,
                                             row.get("last_coactivated"), row["created_at"]))
    return 1


def _insert(db: Database, table: str, values: Mapping[str, Any]) -> int:
    if table == "sessions":
        values = {**values, "updated_at": values.get("updated_at") or values["created_at"]}
    names = ", ".join(values)
    db.execute(f"INSERT INTO {table}({names}) VALUES ({', '.join('?' * len(values))})", list(values.values()))
    return int(db.conn.last_insert_rowid())


def _check_row(where: str, item: Any, fields: Mapping[str, tuple[str, bool]]) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise InvalidInput(f"{where} must be an object")
    row = {}
    for name, (kind, required) in fields.items():
        if name not in item:
            if required:
                raise InvalidInput(f"{where} has no {name}")
            continue
        row[name] = _check_value(f"{where}.{name}", item[name], kind)
    return row


def _check_value(where: str, value: Any, kind: str) -> Any:
    if kind.endswith("?") and value is None:
        return None
    check = _CHECKS[kind.rstrip("?")]
    ok, converted = check(value)
    if not ok:
        raise InvalidInput(f"{where} is not valid: {converted}")
    return converted


def _text(value: Any) -> tuple[bool, Any]:
    try:
        return True, clean_text(value, "text", allow_empty=True)
    except InvalidInput as exc:
        return False, str(exc)


def _number(value: Any) -> tuple[bool, Any]:
    good = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return (True, float(value)) if good else (False, "expected a finite number")


def _time(value: Any) -> tuple[bool, Any]:
    try:
        return True, clean_time(value)
    except InvalidInput as exc:
        return False, str(exc)


def _integer(value: Any, low: int = 0) -> tuple[bool, Any]:
    good = isinstance(value, int) and not isinstance(value, bool) and low <= value <= MAX_INT
    return (True, value) if good else (False, f"expected a whole number from {low} to {MAX_INT}")


def _rating(value: Any) -> tuple[bool, Any]:
    good = value in (None, 1, -1) and not isinstance(value, bool)
    return (True, value) if good else (False, "expected 1, -1 or null")


def _id_list(value: Any) -> tuple[bool, Any]:
    good = isinstance(value, list) and all(_integer(i, 1)[0] for i in value)
    return (True, value) if good else (False, "expected a list of ids")


def _choice(options: tuple[str, ...]) -> Callable[[Any], tuple[bool, Any]]:
    return lambda v: (True, v) if v in options else (False, f"expected one of {', '.join(options)}")


_CHECKS: dict[str, Callable[[Any], tuple[bool, Any]]] = {
    "text": _text, "number": _number, "time": _time, "int": _integer, "id": lambda v: _integer(v, 1),
    "bool": lambda v: (True, v) if isinstance(v, bool) else (False, "expected true or false"),
    "unit": lambda v: (True, float(v)) if _number(v)[0] and 0 <= v <= 1 else (False, "expected 0 to 1"),
    "rating": _rating,
    "object": lambda v: (True, v) if isinstance(v, dict) else (False, "expected an object"),
    "ids": _id_list,
    "kind": _choice(MEMORY_KINDS), "action": _choice(HISTORY_ACTIONS), "edge_kind": _choice(EDGE_KINDS),
}


ONE_OF = {"sessions": "session", "episodes": "episode", "memories": "memory"}


def _check_references(data: Mapping[str, Any]) -> None:
    """Ids must be unique in their section, and every reference must point at a row of the file."""
    known = {}
    for section in ("sessions", "episodes", "memories"):
        ids = [row["id"] for row in data[section]]
        if len(ids) != len(set(ids)):
            raise InvalidInput(f"{section} has the same id twice")
        known[section] = set(ids)
    references = [("episodes", "session_id", "sessions"), ("episodes", "summary_id", "memories"),
                  ("memories", "superseded_by", "memories"), ("memories", "source_episode_ids", "episodes"),
                  ("history", "memory_id", "memories"), ("edges", "a_id", "memories"), ("edges", "b_id", "memories")]
    for section, name, target in references:
        for n, row in enumerate(data[section]):
            value = row.get(name)
            for ref in value if isinstance(value, list) else [value]:
                if ref is not None and ref not in known[target]:
                    raise InvalidInput(f"{section}[{n}].{name} refers to {ONE_OF[target]} {ref}, which the file lacks")
    if any(row["statement"].strip() == "" for row in data["memories"]):
        raise InvalidInput("a memory in the export has an empty statement")
    for n, row in enumerate(data["memories"]):
        if row.get("protected") and row.get("deleted_at") is not None:  # protection means never deleted
            raise InvalidInput(f"memories[{n}] is both protected and in the trash; a memory can be only one")


def _without(row: Mapping[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in names}


def _json_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")
