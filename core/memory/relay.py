"""Text the user relays rather than says: what follows a lead-in about where it came from.

A phrase list ("Forwarding this:", "Fwd:") always misses one ("I read this online:", "My friend sent me this:",
"From my notes app:"), so a lead-in is read by what makes it one: a short clause ending in a colon that points at
the text it introduces ("this", "the following", "here's"), names a source ("from", "via", "according to",
someone's note), or ends on a verb of telling or receiving with at most its recipient and where it was seen
("Mom texted me:", "someone on a forum wrote:", "saw on Twitter:"). Everything after it is relayed.

Quotations and the words of someone the user calls "the user" are never the user's own first-person statement
either (`own_segments`): a critical fact must stand in a segment of the user's words that is theirs — not after a
colon's lead-in, not inside quotation marks, and in the first person (core.memory.engram).
"""
from __future__ import annotations

import re

# A colon that ends a lead-in: not a time (10:30), not a URL (https://), not a ratio or a Bible verse.
_COLON = re.compile(r"(?<![\d:]):(?!//)(?!\d)")  # the first of a run of colons only
_CLAUSE_MARKS = ".!?;\n:"  # where a lead-in's clause begins
LEAD_IN_MAX_WORDS = 12  # a longer run before a colon is the user's own sentence, not a label for what follows
_LOOK_BACK = 160  # characters before a colon read for its lead-in: bounded, so a long paste is read once
# The text introduced, pointed at: "I read this online:", "here's what she wrote:", "the following:", "below:".
# "This is important:" is the user's own: "this" points only where the clause does not start with it.
_POINTER = re.compile(r"(?<=\w )(?:this|these)\b|\b(?:the following|below|here(?:'s|’s| is| are)(?!\s+(?:my|our)\b)|"
                      r"what \w+ (?:\w+ )?(?:wrote|said|sent|says|posted|shared|texted|told))\b", re.IGNORECASE)
# Where it came from: "from my notes app", "via Slack", "according to the label"; "from me" is the user's own.
_SOURCE = re.compile(r"\b(?:from|via|according to|courtesy of|source)\b(?!\s+(?:me|myself)\b)", re.IGNORECASE)
# Someone else's words or document: "Bob's email:", "my doctor's note:" (not "it's", "that's", "I'm", "let's").
_POSSESSIVE = re.compile(r"\b(?!(?:it|that|there|here|what|who|he|she|let|where|how|today|tonight|tomorrow|yesterday|"
                         r"week|month|year|morning|evening)['’]s\b)\w+['’]s\b", re.IGNORECASE)
# Verbs of telling, writing, sending or receiving text (any tense the lead-in uses).
_RELAY_VERB = (r"(?:read|reads|saw|seen|sees|found|got|gets|received|sent|sends|"
               r"wrote|writes|written|said|says|posted|posts|shared|shares|texted|texts|emailed|emails|"
               r"messaged|messages|tweeted|tweets|replied|replies|answered|told|tells|heard|copied|pasted|forwarded|"
               r"quoted|quotes|screenshotted|dm'?d|pinged|commented|wrote back|put it)")
# The verb with nothing after it but who received it and where it was: "Mom texted me:", "saw on Reddit:".
_TOLD = re.compile(rf"\b{_RELAY_VERB}(?:\s+(?:me|us|him|her|them|to me|to us))?"
                   r"(?:\s+(?:online|today|yesterday|earlier|once|somewhere|recently|(?:on|in|at|under|over) "
                   r"[\w'’ -]{1,40}))?\s*$", re.IGNORECASE)
_LEAD_IN = re.compile("|".join(f"(?:{p.pattern})" for p in (_POINTER, _SOURCE, _POSSESSIVE, _TOLD)), re.IGNORECASE)
_QUOTED = re.compile("\"[^\"\n]*\"|\u201c[^\u201d\u201c]*\u201d|\u00ab[^\u00bb]*\u00bb")
_THE_USER = re.compile(r"\bthe user(?:'s|’s)?\b", re.IGNORECASE)
_SEGMENT_BREAK = re.compile(r":(?!//)")


def relay_start(text: str) -> int | None:
    """Where relayed text's lead-in starts in `text` (None: nothing in it is relayed)."""
    for colon in _COLON.finditer(text):
        start = _clause_start(text, colon.start())
        if is_relay_lead_in(text[start:colon.start()]):
            return start
    return None


def _clause_start(text: str, colon: int) -> int:
    """Just after the last sentence end, line break or colon before `colon`, looking back _LOOK_BACK characters at
    most (rfind, not a regex over the window: a paste of colons is read once, not 160 times)."""
    low = max(0, colon - _LOOK_BACK)
    return max(max(text.rfind(mark, low, colon) for mark in _CLAUSE_MARKS) + 1, low)


def is_relay_lead_in(clause: str) -> bool:
    """Whether a clause before a colon introduces text from elsewhere (see the module's docstring)."""
    clause = clause.strip(" \t\"'“”*_-–—>()[]")
    return bool(clause) and _LEAD_IN.search(clause) is not None and len(clause.split()) <= LEAD_IN_MAX_WORDS


def own_segments(sentence: str) -> list[str]:
    """The parts of one sentence of the user's own words that can be their first-person statement: each part after
    a colon on its own (a lead-in's "I" does not make what follows the user's), quotations taken out, and no part
    that speaks of "the user" (nobody calls themself that; a model's or another app's text does)."""
    unquoted = _QUOTED.sub(" \n ", sentence)
    parts = [p for chunk in unquoted.split("\n") for p in _SEGMENT_BREAK.split(chunk)]
    return [p for p in parts if p.strip() and not _THE_USER.search(p)]
