"""Which of the items in a reply's context the reply drew on: what counts as a *use* of a memory or a turn.

Recall fills the context with up to k items; most of them are there in case, not because the answer needs them.
Counting every one as used made forgetting read incidental recalls as the user's interest (bench/forgetting.py:
97 % of the uses, ~80 % of everything said "used" by day 90, so nothing was ever forgotten). A use is evidence
that the reply took something from the item: the reply carries one of the item's content words that the user's
message did not bring and no other item in the context has (a name, a place, "violin"), or at least half of the
item's words the message did not bring. The usefulness rating (core.turn_learner), when a structured model runs,
adds the uses this lexical test misses (a paraphrase) — those whose meaning the reply supports (a weak model calls
everything useful).
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from core.memory.grounding import content_words

CARRIED_SHARE = 0.5  # of an item's own words (those the user's message did not bring) the reply repeats


def drawn_on(user_text: str, reply_text: str, items: Sequence[str]) -> list[bool]:
    """For each context item's text, whether the reply drew on it (see the module's docstring)."""
    asked = content_words(user_text)
    replied = content_words(reply_text) - asked
    own = [content_words(text) - asked for text in items]
    holders = Counter(word for words in own for word in words)
    return [_drew_on(words, words & replied, holders) for words in own]


def _drew_on(own: set[str], carried: set[str], holders: Counter) -> bool:
    if not carried:
        return False
    distinctive = any(holders[word] == 1 for word in carried)
    return distinctive or len(carried) >= CARRIED_SHARE * len(own)
