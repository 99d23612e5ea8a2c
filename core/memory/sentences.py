"""A turn's sentences, each given a vector of its own so that one clause of a long turn is not averaged away.

A turn's vector is the mean meaning of everything in it; a question usually asks about one thing it said ("When
did Melanie paint a sunrise?" against a turn that also talks about her kids and a camping trip). Recall scores a
turn by the better of its own vector and its best sentence's (core.memory.recall_sources). LoCoMo dev, the whole
recall path: R@10/R@50 0.8165/0.9234 → 0.8284/0.9261 (multi-hop 0.478 → 0.501, temporal 0.872 → 0.892,
adversarial 0.899 → 0.914; bench/notes.md, seventh pass).

Only what the person said is split: the assistant's reply is the model's words, which the turn's own vector
already carries. A turn gets sentence vectors when it has two sentences or more, or a reply that its own vector
would otherwise be mostly made of.
"""
from __future__ import annotations

import re

# A sentence ends at . ! or ? followed by a space, or at a line break (pasted notes and lists have no full stops).
# Never a space run before the line break (r"\s*\n"): tried at every space of a long run, that took quadratic time.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n\s*")
# "Wow!" or "Thanks." alone means nothing: joined to the sentence after it (LoCoMo dev R@10 with a limit of 1, 3, 5
# and 8 words: 0.826, 0.8285, 0.821, 0.820)
MIN_WORDS = 3
MAX_SENTENCES = 32  # a pasted page: its sentences past the 31st share the last vector, so a turn costs at most 32 rows


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets into `text` of its sentences, short ones joined to the next, at most MAX_SENTENCES."""
    pieces = _pieces(text)
    spans: list[tuple[int, int]] = []
    start = None
    for begin, end in pieces:
        start = begin if start is None else start
        if len(text[start:end].split()) >= MIN_WORDS:
            spans.append((start, end))
            start = None
    if start is not None:  # short words at the end join the sentence before them
        spans[-1:] = [(spans[-1][0] if spans else start, pieces[-1][1])]
    if len(spans) > MAX_SENTENCES:
        spans[MAX_SENTENCES - 1:] = [(spans[MAX_SENTENCES - 1][0], spans[-1][1])]
    return spans


def _pieces(text: str) -> list[tuple[int, int]]:
    """Every stretch between two boundaries, without its surrounding spaces."""
    bounds = [(0, 0), *((m.start(), m.end()) for m in _BOUNDARY.finditer(text)), (len(text), len(text))]
    pieces = []
    for (_, start), (end, _) in zip(bounds, bounds[1:]):
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            pieces.append((start, end))
    return pieces


def turn_sentences(user_text: str, assistant_text: str) -> list[tuple[int, int]]:
    """The spans of the user's words that get vectors of their own: none when the turn is one sentence and has no
    reply (the turn's own vector is that sentence's)."""
    spans = sentence_spans(user_text)
    if len(spans) < 2 and not assistant_text.strip():
        return []
    return spans


def sentence_text(speaker: str, sentence: str) -> str:
    """What a sentence's vector is made from: who said it, as a turn's (core.memory.index.episode_text)."""
    return f'{speaker} said, "{sentence}"'
