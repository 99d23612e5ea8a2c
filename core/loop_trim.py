"""A reply the model stopped because it went round in a loop (models/repetition.py) is stored and shown without the
loop: each line it said once, and a phrase said over and over within a line said once. What was said before the loop
stays in order; a line cut off mid-way that only begins a line already said goes too. Pure text in, text out."""
from __future__ import annotations

import re

# A phrase of 3 to 120 characters said three times or more in a row on one line ("a Venezia, a Venezia, a Venezia").
_REPEATED = re.compile(r"([^\n]{3,120}?)\1{2,}")


def without_loop(text: str) -> str:
    kept: list[str] = []
    said: set[str] = set()
    for line in _collapsed(text).splitlines(keepends=True):
        words = line.strip()
        if has_letter(words) and words in said:
            continue
        said.add(words)
        kept.append(line)
    while kept and _cut_off(kept[-1].strip(), [k.strip() for k in kept[:-1]]):
        kept.pop()
    trimmed = "".join(kept)
    return trimmed if trimmed == text else trimmed.rstrip()


def _collapsed(text: str) -> str:
    """Each phrase said three times or more in a row once; a cut-off start of it after the last one goes too."""
    out, at = [], 0
    for found in _REPEATED.finditer(text):
        phrase = found.group(1)
        if not has_letter(phrase):
            continue  # a table's rule or a row of dashes is not a loop
        rest = text[found.end():].split("\n", 1)[0]
        end = found.end() + (len(rest) if rest and phrase.startswith(rest) else 0)
        out.append(text[at:found.start()] + phrase)
        at = end
    return "".join(out) + text[at:]


def _cut_off(last: str, before: list[str]) -> bool:
    """The reply's last line only begins one of the lines before it (the loop was stopped mid-line)."""
    return bool(last) and any(line != last and line.startswith(last) for line in before)


def has_letter(text: str) -> bool:
    """Whether a line says anything in words (a table rule or a row of dashes repeats without looping)."""
    return any(ch.isalpha() for ch in text)
