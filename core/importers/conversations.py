"""What an import from another assistant reads, whatever the source: conversations of turns, and memory lines.

Every parser (chatgpt, claude, gemini, memory_list) turns its source's own shape into these dataclasses, so writing
to the store (core.importers.write) knows one shape. Keys are built from the source's own ids, so importing the
same export again finds what it already holds and adds nothing.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from core.errors import InvalidInput

SOURCES = {"chatgpt": "ChatGPT", "claude": "Claude", "gemini": "Gemini", "memories": "a memory list"}
MAX_TURN_CHARS = 200_000  # core.store.text.MAX_TEXT_CHARS: a longer message is cut, and counted as cut


@dataclass(frozen=True)
class ImportedTurn:
    key: str  # stable: the source's message id (or a digest where it has none)
    user_text: str
    assistant_text: str
    created_at: float


@dataclass(frozen=True)
class ImportedConversation:
    key: str
    title: str
    created_at: float
    turns: tuple[ImportedTurn, ...]


@dataclass
class Parsed:
    source: str  # a key of SOURCES
    conversations: list[ImportedConversation] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)  # one remembered thing a line, as the other app showed it
    skipped: Counter = field(default_factory=Counter)  # what was left out, by reason ("images", "tool messages")

    @property
    def turn_count(self) -> int:
        return sum(len(c.turns) for c in self.conversations)


class TurnBuilder:
    """Pairs messages into turns as they come, in order: a person's message opens a turn, what the assistant says
    next is its reply (several assistant messages in a row are one reply). An assistant message before any
    question is not a turn of the person's: skipped and counted."""

    def __init__(self, skipped: Counter) -> None:
        self.turns: list[ImportedTurn] = []
        self.skipped = skipped
        self._open: tuple[str, str, float] | None = None
        self._replies: list[str] = []

    def user(self, key: str, text: str, at: float) -> None:
        self._close()
        self._open = (key, clip(text, self.skipped), at)

    def assistant(self, text: str) -> None:
        if self._open is None:
            self.skipped["assistant messages before any question"] += 1
            return
        self._replies.append(text)

    def finish(self) -> tuple[ImportedTurn, ...]:
        self._close()
        return tuple(self.turns)

    def _close(self) -> None:
        if self._open is not None:
            key, text, at = self._open
            reply = clip("\n\n".join(r for r in self._replies if r.strip()), self.skipped)
            self.turns.append(ImportedTurn(key, text, reply, at))
        self._open, self._replies = None, []


def clip(text: str, skipped: Counter) -> str:
    if len(text) <= MAX_TURN_CHARS:
        return text
    skipped["messages cut to 200,000 characters"] += 1
    return text[:MAX_TURN_CHARS]


def plain(value: object) -> str:
    """Text as stored: a str without NUL bytes or lone surrogates (both refused by the store), else ''."""
    if not isinstance(value, str):
        return ""
    value = value.replace("\x00", "")
    return value.encode("utf-8", "replace").decode("utf-8") if _SURROGATE.search(value) else value


_SURROGATE = re.compile("[\ud800-\udfff]")


def epoch(value: object, fallback: float | None = None) -> float | None:
    """Seconds since 1970 from a source's time: a number (ChatGPT) or an ISO 8601 string (Claude, Gemini)."""
    if isinstance(value, bool):
        return fallback
    if isinstance(value, (int, float)):
        seconds = float(value)
        return seconds if math.isfinite(seconds) and 0 <= seconds < 253_402_300_799 else fallback
    if isinstance(value, str) and value.strip():
        text = value.strip().replace("Z", "+00:00")
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            return fallback
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        return moment.timestamp()
    return fallback


def collect(parsed: "Parsed", items: Iterable, is_conversation: Callable[[Mapping[str, Any]], bool],
            read: Callable[[Mapping[str, Any], int, Counter], "ImportedConversation"]) -> "Parsed":
    """Each item `is_conversation` accepts, read into `parsed`; the rest, and conversations with no message of the
    person's, counted as skipped (what ChatGPT's and Claude's lists of conversations share)."""
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or not is_conversation(item):
            parsed.skipped["entries that are not conversations"] += 1
            continue
        conversation = read(item, index, parsed.skipped)
        if conversation.turns:
            parsed.conversations.append(conversation)
        else:
            parsed.skipped["conversations without a message of yours"] += 1
    return parsed


def expect_list(data: object, what: str) -> Iterable:
    """A list of entries, or an iterator over them (core.importers.json_stream reads a large export item by
    item)."""
    if not isinstance(data, (list, Iterator)):
        raise InvalidInput(f"this is not {what}: expected a list of conversations, found {type(data).__name__}")
    return data


def source_label(source: str, at: float | None) -> str:
    """'imported from ChatGPT, 2024-05-02': how an imported conversation or turn names where it came from."""
    name = SOURCES.get(source, source)
    if at is None:
        return f"imported from {name}"
    day = dt.datetime.fromtimestamp(at, dt.timezone.utc).date().isoformat()
    return f"imported from {name}, {day}"
