"""A reply the model stopped because it went round in a loop (models/repetition.py) is stored and shown without the
loop: each line it said once, and a phrase said over and over within a line said once. What was said before the loop
stays in order; a line cut off mid-way that only begins a line already said goes too. Pure text in, text out."""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

# A phrase of 3 to 120 characters said three times or more in a row on one line ("a Venezia, a Venezia, a Venezia").
_REPEATED = re.compile(r"([^\n]{3,120}?)\1{2,}")


# The same phrase four times or more in a row, over 24 characters at least: what models/repetition.py stops while a
# reply streams, looked for again in the whole reply (a model may end a loop itself before the guard saw it whole).
_LOOPING = re.compile(r"([^\n]{3,120}?)\1{3,}")
LOOP_SPAN = 24
LINE_LIMIT = 6  # the same line this many times in one reply (models/repetition.py's LINE_LIMIT)


def goes_round(text: str) -> bool:
    """Whether a finished reply went round in a loop: a phrase said over and over in a row, or one line said again
    and again. "Eu, não, e não!" ten times is a loop; "Lina, no!" once is a reply."""
    for found in _LOOPING.finditer(text):
        if has_letter(found.group(1)) and found.end() - found.start() >= LOOP_SPAN:
            return True
    lines = [line.strip() for line in text.splitlines() if has_letter(line)]
    return any(lines.count(line) >= LINE_LIMIT for line in set(lines))


def without_loop(text: str) -> str:
    kept: list[str] = []
    said: set[str] = set()
    for line in _collapsed(text).splitlines(keepends=True):
        words = line.strip()
        if has_letter(words) and words in said:
            continue
        said.add(words)
        kept.append(line)
    _drop_cut_off_end(kept)
    trimmed = "".join(kept)
    return trimmed if trimmed == text else trimmed.rstrip()


def _collapsed(text: str) -> str:
    """Each phrase said three times or more in a row once; a cut-off start of it after the last one goes too."""
    out, at, line_end = [], 0, -1
    for found in _REPEATED.finditer(text):
        phrase = found.group(1)
        if not has_letter(phrase):
            continue  # a table's rule or a row of dashes is not a loop
        if line_end < found.end():  # looked up once per line: a copy of the rest per match made long lines quadratic
            newline = text.find("\n", found.end())
            line_end = newline if newline >= 0 else len(text)
        rest = line_end - found.end()  # sliced only when it could be the phrase's start: at most 120 characters
        cut_off = 0 < rest <= len(phrase) and phrase.startswith(text[found.end():line_end])
        end = found.end() + (rest if cut_off else 0)
        out.append(text[at:found.start()] + phrase)
        at = end
    return "".join(out) + text[at:]


def _drop_cut_off_end(kept: list[str]) -> None:
    """Drop the reply's last lines while each only begins a line before it (the loop was stopped mid-line)."""
    stripped = [line.strip() for line in kept]
    # The lines before the last, sorted, so each check is a look-up rather than a scan of them all.
    before = sorted(stripped[:-1])
    while kept and _cut_off(stripped[-1], before):
        kept.pop()
        stripped.pop()
        if stripped:
            del before[bisect_left(before, stripped[-1])]


def _cut_off(last: str, before: list[str]) -> bool:
    """Whether `last` begins a different line of `before` (sorted): lines that begin with `last` and are longer
    sort right after any copies of `last` itself."""
    after_copies = bisect_right(before, last)
    return bool(last) and after_copies < len(before) and before[after_copies].startswith(last)


def has_letter(text: str) -> bool:
    """Whether a line says anything in words (a table rule or a row of dashes repeats without looping)."""
    return any(ch.isalpha() for ch in text)
