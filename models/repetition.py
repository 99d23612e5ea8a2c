"""Noticing a reply that has fallen into a loop, so it ends there instead of at the length limit.

Seen in a real window: SmolLM2-135M (the model an 8 GB machine, or this Linux box, runs) answered one message with
a thousand tokens of "E também não." / "São, não." and another with ", a Venezia" forty times. A small model that
starts repeating itself does not stop; the user waits and reads nothing new. Two signs, both rare in a real reply:
the last tokens are one block said over and over (", a Venezia, a Venezia, …"), one line comes for the sixth time
within sixteen lines ("E também não."), or nearly every recent line was said before in the reply, a handful of lines
going round in a shifting order ("You forgot to add the 'm5' in the question." among four others, to the limit).
A block or line without a letter (a table's rule, a row of dashes) is never a loop; a song's chorus between new verses
is not one either (8 of its last 12 lines said before, at most).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from core.loop_trim import has_letter

MAX_BLOCK = 48  # tokens in the longest repeated block looked for
MIN_REPEATS = 4  # a block said this many times in a row ...
MIN_SPAN = 24  # ... over at least this many tokens
LINE_LIMIT = 6  # the same line, said this many times ...
LINE_WINDOW = 16  # ... among the last this many lines (a long program may say "else:" six times, far apart)
STALE_WINDOW = 12  # of the last this many lines with a letter ...
STALE_LIMIT = 9  # ... this many said before in the reply: nothing new is being said


@dataclass
class RepetitionGuard:
    tokens: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    lines: deque = field(default_factory=lambda: deque(maxlen=LINE_WINDOW))
    partial: str = ""
    said: set = field(default_factory=set)
    stale: deque = field(default_factory=lambda: deque(maxlen=STALE_WINDOW))

    def add(self, token: int, text: str) -> bool:
        """Take the next token and the text it made readable; True once the reply is going round in a loop."""
        self.tokens.append(token)
        self.texts.append(text)
        return self._line_loop(text) or self._block_loop()

    def _line_loop(self, text: str) -> bool:
        *done, self.partial = (self.partial + text).split("\n")
        looping = False
        for line in (d.strip() for d in done):
            self.lines.append(line)
            if not has_letter(line):
                continue
            self.stale.append(line in self.said)
            self.said.add(line)
            looping = looping or self.lines.count(line) >= LINE_LIMIT or sum(self.stale) >= STALE_LIMIT
        return looping

    def _block_loop(self) -> bool:
        tokens = self.tokens
        for size in range(1, min(MAX_BLOCK, len(tokens) // MIN_REPEATS) + 1):
            repeats = max(MIN_REPEATS, -(-MIN_SPAN // size))
            span = size * repeats
            if span > len(tokens) or tokens[-1] != tokens[-1 - size]:
                continue
            block = tokens[-size:]
            if tokens[-span:] == block * repeats and has_letter("".join(self.texts[-size:])):
                return True
        return False
