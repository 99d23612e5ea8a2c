"""Reading another assistant's export from disk: a ZIP as downloaded, or the JSON (or text) file inside it.

An export is untrusted input. A member is read with a hard cap on the bytes it inflates to (a ZIP bomb's declared
sizes are lies, so they are never trusted), JSON must be UTF-8, and every failure is one InvalidInput line that
names the file, raised before anything is written.
"""
from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from core.errors import InvalidInput
from core.importers import chatgpt, claude, gemini, memory_list
from core.importers.conversations import Parsed
from core.importers.json_stream import json_items

MAX_JSON_BYTES = 512 * 1024 * 1024  # Python holds a parsed JSON at several times its size: more would not fit
MAX_TEXT_BYTES = 4 * 1024 * 1024  # a pasted memory list
MAX_MEMBERS = 200_000
CHUNK = 1 << 20
PEEK = 256 * 1024  # enough of a file to tell whose export it is


@dataclass(frozen=True)
class Wanted:
    names: tuple[str, ...]  # file names inside the export, lower-case, the first found wins
    inside: str = ""  # a folder the member must sit under (Takeout holds one MyActivity.json per product)


CONVERSATIONS = {
    "chatgpt": Wanted(("conversations.json",)),
    "claude": Wanted(("conversations.json",)),
    "gemini": Wanted(("myactivity.json", "my activity.json"), inside="gemini"),
}


def read_export(source: str, path: Path | str) -> Parsed:
    """The parsed export of `source` (chatgpt, claude, gemini or memories) at `path`, or InvalidInput."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"{path} is not a file")
    if source == "memories":
        return memory_list.parse(_text(path.name, _bounded(path.open("rb"), MAX_TEXT_BYTES, path.name)))
    if source not in CONVERSATIONS:
        raise InvalidInput(f"cannot import from {source!r}: choose chatgpt, claude, gemini or memories")
    if zipfile.is_zipfile(path):
        return _from_zip(source, path)
    if path.stat().st_size > MAX_JSON_BYTES:
        raise InvalidInput(f"{path.name} is larger than {MAX_JSON_BYTES // 2**20} MB; refusing to import it")
    with path.open("rb") as stream:
        return _parser(source)(json_items(path.name, stream, MAX_JSON_BYTES))


def detect_source(path: Path | str) -> str:
    """Which assistant's export `path` is (chatgpt, claude, gemini or memories), from a look at its first bytes;
    InvalidInput when it is none of them. Drop a file, and Engram knows what it is."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"{path} is not a file")
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                members = archive.infolist()[:MAX_MEMBERS]
                if _find(members, CONVERSATIONS["gemini"]) is not None:
                    return "gemini"
                found = _find(members, CONVERSATIONS["chatgpt"])
                head = archive.open(found).read(PEEK) if found is not None else b""
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as exc:
            raise InvalidInput(f"{path.name} is a damaged ZIP file ({exc})") from None
    else:
        with path.open("rb") as handle:
            head = handle.read(PEEK)
    kind = _kind_of(head)
    if kind is None:
        raise InvalidInput(f"{path.name} is not an export Engram can read (ChatGPT's, Claude's or Google Takeout's "
                           "ZIP, or a memory list as text)")
    return kind


def _kind_of(head: bytes) -> str | None:
    text = head.decode("utf-8", "ignore").lstrip("\ufeff \t\r\n")
    if text.startswith(("[", "{")):
        for marker, kind in (('"mapping"', "chatgpt"), ('"chat_messages"', "claude"), ('"Gemini Apps"', "gemini"),
                             ('"header"', "gemini")):
            if marker in text:
                return kind
        return None
    return "memories" if text.strip() and "\x00" not in text else None


def _from_zip(source: str, path: Path) -> Parsed:
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_MEMBERS:
                raise InvalidInput(f"{path.name} holds {len(members):,} files; refusing to open it")
            member = _find(members, CONVERSATIONS[source])
            if member is None:
                raise InvalidInput(f"{path.name} is not a {_name(source)} export: it holds no "
                                   f"{CONVERSATIONS[source].names[0]}")
            extra = None
            if source == "claude":
                found = _find(members, Wanted(("memories.json",)))
                extra = _json(found.filename, _bounded(archive.open(found), MAX_TEXT_BYTES * 4, found.filename)) \
                    if found is not None else None
            with archive.open(member) as stream:  # parsed as it inflates: the ZIP stays open until the end
                data = json_items(member.filename, stream, MAX_JSON_BYTES)
                return claude.parse(data, extra) if source == "claude" else _parser(source)(data)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as exc:
        raise InvalidInput(f"{path.name} is a damaged ZIP file ({exc})") from None


def _find(members: list[zipfile.ZipInfo], wanted: Wanted) -> zipfile.ZipInfo | None:
    for name in wanted.names:
        for member in members:
            parts = PurePosixPath(member.filename.lower()).parts
            if member.is_dir() or not parts or parts[-1] != name:
                continue
            if not wanted.inside or any(wanted.inside in part for part in parts[:-1]):
                return member
    return None


def _bounded(stream: Any, limit: int, name: str) -> bytes:
    """At most `limit` bytes, inflated: past it the file is refused, whatever its header said its size was."""
    with stream:
        chunks, total = [], 0
        while chunk := stream.read(CHUNK):
            total += len(chunk)
            if total > limit:
                raise InvalidInput(f"{name} is larger than {limit // 2**20} MB once unpacked; refusing to import it")
            chunks.append(chunk)
    return b"".join(chunks)


def _text(name: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{name} is not UTF-8 text (byte {exc.start})") from None


def _json(name: str, raw: bytes) -> Any:
    try:
        return json.loads(_text(name, raw), parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{name} is not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise InvalidInput(f"{name} is nested too deeply to be an export") from None


def _refuse_constant(name: str) -> Any:
    raise InvalidInput(f"the export holds {name}, which is not JSON")


def _parser(source: str) -> Callable[[Any], Parsed]:
    return {"chatgpt": chatgpt.parse, "claude": claude.parse, "gemini": gemini.parse}[source]


def _name(source: str) -> str:
    return {"chatgpt": "ChatGPT", "claude": "Claude", "gemini": "Google Takeout (Gemini)"}[source]
