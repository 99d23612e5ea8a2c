"""What the command line prints is safe for the terminal that shows it.

A memory, a recalled turn or a model's reply can hold terminal control sequences (ESC … changes colours, moves
the cursor or retitles the window; BEL rings) and bidirectional overrides that make text read differently from
what it is. Everything the CLI writes to standard output goes through `SafeStream`, which shows those
characters escaped (`\\u001b`, `\\u202e`) and leaves every other character, newlines and tabs as they are.
"""
from __future__ import annotations

import re
from typing import Any, TextIO

# C0 controls but tab and newline, DEL and C1, the invisible characters that reorder or hide text, and lone
# surrogates (bytes that were not UTF-8: they cannot even be written out).
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
                    "\ud800-\udfff]")
UNSAFE_IN_A_LINE = re.compile(UNSAFE.pattern[:-1] + "\t\n]")


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` with every terminal control and bidi override shown as an escape (and, for a message that must
    stay one line, tabs and newlines too)."""
    return (UNSAFE_IN_A_LINE if one_line else UNSAFE).sub(_escape, text)


def _escape(match: re.Match) -> str:
    # \\uXXXX for every one: readable in a terminal, and the same character again inside `--json` output's strings
    # (json.dumps leaves DEL, C1 controls, bidi overrides and lone surrogates as they are; "\\x85" is not JSON).
    return f"\\u{ord(match.group()):04x}"


class SafeStream:
    """A text stream that escapes what `printable` escapes on the way out; everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        safe = printable(text)
        try:
            self._stream.write(safe)
        except UnicodeEncodeError:  # a terminal that is not UTF-8 (LANG=…ISO-8859-1): "Zo\xeb", not a failure
            encoding = getattr(self._stream, "encoding", None) or "ascii"
            self._stream.write(safe.encode(encoding, "backslashreplace").decode(encoding))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
