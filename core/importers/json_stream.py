"""An export's JSON read as it is inflated: a top-level list one item at a time.

Why: an export is one JSON list of conversations, and json.loads holds the whole text and its whole tree of dicts at
once — a 100,000-turn ChatGPT export (~120 MB of JSON) peaked at ~520 MB before a turn was written. Read item by item,
only the parsed conversations stay (the parsers keep what they need of each and drop the rest). Anything but a list
at the top (Claude's re-wrapped export, a wrong shape) is read whole, within the same byte limit. The errors are the
ones a whole read gives: not UTF-8, not valid JSON (with its line and column), NaN, nested too deeply, too large.
"""
from __future__ import annotations

import codecs
import json
from typing import IO, Any, Iterator

from core.errors import InvalidInput

CHUNK = 1 << 20  # bytes inflated at a time
WHITESPACE = " \t\n\r"


def json_items(name: str, stream: IO[bytes], limit: int) -> Any:
    """The JSON value in `stream`: an iterator over its items when it is a list, else the value itself. `limit`:
    the most bytes read before the file is refused (a ZIP's declared sizes are never trusted). Every error is an
    InvalidInput naming `name`, raised while the items are read — so a caller consumes them all before it writes."""
    reader = _Reader(name, stream, limit)
    reader.skip_whitespace()
    if reader.peek() != "[":
        return reader.whole()
    reader.pos += 1
    return reader.items()


class _Reader:
    def __init__(self, name: str, stream: IO[bytes], limit: int) -> None:
        self.name, self.stream, self.limit = name, stream, limit
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.json = json.JSONDecoder(parse_constant=_refuse_constant)
        self.text, self.pos = "", 0
        self.read, self.ended = 0, False
        self.lines_before, self.column_before = 0, 0  # where self.text begins in the file (for error messages)

    def more(self, size: int = CHUNK) -> bool:
        """Read on: False at the end of the stream."""
        if self.ended:
            return False
        raw = self.stream.read(size)
        self.read += len(raw)
        if self.read > self.limit:
            raise InvalidInput(f"{self.name} is larger than {self.limit // 2**20} MB once unpacked; refusing to "
                               "import it")
        try:
            piece = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{self.name} is not UTF-8 text (byte {self.read - len(raw) + exc.start})") from None
        self.ended = not raw
        self._drop_read()
        self.text += piece
        return True

    def _drop_read(self) -> None:
        """Forget the text already parsed, keeping count of its lines for error messages."""
        if self.pos < CHUNK:
            return
        gone = self.text[:self.pos]
        newlines = gone.count("\n")
        self.column_before = len(gone) - gone.rfind("\n") - 1 if newlines else self.column_before + len(gone)
        self.lines_before += newlines
        self.text, self.pos = self.text[self.pos:], 0

    def peek(self) -> str:
        while self.pos >= len(self.text):
            if not self.more():
                return ""
        return self.text[self.pos]

    def skip_whitespace(self) -> None:
        while (sign := self.peek()) and sign in WHITESPACE:
            self.pos += 1

    def whole(self) -> Any:
        while self.more():
            pass
        value = self.value()
        self.skip_whitespace()
        if self.peek():
            raise self.invalid("Extra data", self.pos)
        return value

    def items(self) -> Iterator[Any]:
        self.skip_whitespace()
        if self.peek() == "]":
            self.pos += 1
        else:
            while True:
                yield self.value()
                self.skip_whitespace()
                sign = self.peek()
                self.pos += 1
                if sign == "]":
                    break
                if sign != ",":
                    raise self.invalid("Expecting ',' delimiter" if sign else "Unexpected end of the file",
                                       self.pos - 1)
                self.skip_whitespace()
        self.skip_whitespace()
        if self.peek():
            raise self.invalid("Extra data", self.pos)

    def value(self) -> Any:
        """The JSON value at the reading position: read further while it is cut off, and while it ends where the
        text read so far does (a number could go on)."""
        size = CHUNK
        while True:
            try:
                value, end = self.json.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.more(size):
                    size *= 2  # one large conversation: parsed again as often as the text doubles, not per chunk
                    continue
                raise self.invalid(exc.msg, exc.pos) from None
            except RecursionError:
                raise InvalidInput(f"{self.name} is nested too deeply to be an export") from None
            if end == len(self.text) and self.more(size):
                continue
            self.pos = end
            return value

    def invalid(self, why: str, at: int) -> InvalidInput:
        line = self.text.count("\n", 0, at)
        column = at - self.text.rfind("\n", 0, at)
        if line == 0:
            column += self.column_before
        return InvalidInput(f"{self.name} is not valid JSON (line {self.lines_before + line + 1}, column {column})")


def _refuse_constant(name: str) -> Any:
    raise InvalidInput(f"the export holds {name}, which is not JSON")
