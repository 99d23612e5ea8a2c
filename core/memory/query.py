"""Query analysis: validate what the user asked, pick out its content words, and build a safe FTS5 query.

User text never reaches FTS5 as syntax: every word is quoted, so quotes, operators (AND, NEAR, *, ^, :)
and any unicode come out as plain terms.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.store.text import clean_text

MAX_QUERY_CHARS = 4000  # a query is a question, not a document; longer input is refused, not truncated
WORD = re.compile(r"\w+", re.UNICODE)
STOP_WORDS = frozenset("""
a about after all also am an and any are as at be been before being but by can could did do does doing
done for from had has have having he her here hers him his how i if in into is it its just me might more
most my no nor not now of on once only or other our ours out over own she should so some such than that
the their theirs them then there these they this those to too under until up very was we were what when
where which while who whom why will with would you your yours yet ever did does got get gets
""".split())


@dataclass(frozen=True)
class QueryAnalysis:
    text: str  # the query as given, validated
    terms: tuple[str, ...]  # lower-cased content words, in order, without repeats
    words: tuple[str, ...] = ()  # every word as written, stop words included


def analyse(query: object) -> QueryAnalysis:
    """Validate a recall query (InvalidInput if empty, NUL, invalid UTF-8 or too long) and analyse it."""
    text = clean_text(query, "query", max_chars=MAX_QUERY_CHARS)
    words = WORD.findall(text)
    terms = _unique(w.lower() for w in words if _is_content(w))
    return QueryAnalysis(text=text, terms=terms, words=tuple(words))


def _is_content(word: str) -> bool:
    """Not a stop word; a number counts only when it looks like a year or longer (dates matter, '2' does not)."""
    return word.lower() not in STOP_WORDS and (not word.isdigit() or len(word) >= 4)


def quote_fts(term: str) -> str:
    """One FTS5 string literal: double quotes inside are doubled, so nothing in it is syntax."""
    return '"' + term.replace('"', '""') + '"'


def stem(word: str) -> str:
    """A crude English stem, only to name the matched words (FTS5's porter stemmer does the real matching)."""
    for suffix in ("ing", "ed", "ies", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            if suffix == "es" and not word[:-2].endswith(("s", "x", "z", "ch", "sh")):
                continue
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _unique(items) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def query_of_message(message: str, limit: int = MAX_QUERY_CHARS) -> str:
    """What a long chat message recalls with: its opening and, most of all, its end, where a pasted document's
    question usually stands. A search query the user types is never cut (analyse refuses it instead)."""
    if len(message) <= limit:
        return message
    head = limit // 4
    return message[:head] + " … " + message[-(limit - head - 3):]
