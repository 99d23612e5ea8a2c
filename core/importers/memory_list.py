"""A pasted memory list: what ChatGPT's "Manage memories" or Claude's memory page shows, one memory a line.

Bullets ("- ", "* ", "• ", "1. "), surrounding quotes and blank lines are dropped; a heading line ("# About me",
"Memories:") is not a memory. Each remaining line is stored as a memory, as the user's own statement about
themself (they chose to bring it), never as an instruction to the model: it is text in a memory row like any other.
"""
from __future__ import annotations

import re

from core.importers.conversations import Parsed, plain

MAX_LINE_CHARS = 2_000  # a memory is a sentence or two; a longer line is a paragraph pasted by mistake
_BULLET = re.compile(r"^\s*(?:[-*•·‣◦]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s*(?:#+\s.*|[^.!?]{1,60}:|\*\*[^*]+\*\*:?|__[^_]+__:?)\s*$")


def parse(text: str) -> Parsed:
    parsed = Parsed("memories")
    for line in lines(plain(text)):
        if len(line) > MAX_LINE_CHARS:
            parsed.skipped["lines too long to be one memory"] += 1
        else:
            parsed.memories.append(line)
    parsed.memories = list(dict.fromkeys(parsed.memories))
    return parsed


def lines(text: str) -> list[str]:
    """The memory lines of `text`. In a bulleted list, a short line without a bullet is a heading ("Memories")."""
    rows = [raw for raw in text.splitlines() if raw.strip() and not _HEADING.match(raw)]
    bulleted = any(_BULLET.match(raw) for raw in rows)
    found = []
    for raw in rows:
        if bulleted and not _BULLET.match(raw) and len(raw.split()) < 4:
            continue
        line = _BULLET.sub("", raw).strip().strip("\"'“”‘’").strip()
        if line:
            found.append(line)
    return found
