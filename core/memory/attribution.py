"""Which of the items in a reply's context the reply drew on: what counts as a *use* of a memory or a turn.

Recall fills the context with up to k items; most of them are there in case, not because the answer needs them.
Counting every one as used made forgetting read incidental recalls as the user's interest (bench/forgetting.py:
97 % of the uses, ~80 % of everything said "used" by day 90, so nothing was ever forgotten). A use is evidence
that the reply took something from the item: the reply carries one of the item's content words that the user's
message did not bring and no other item in the context has (a name, a place, "violin"), or at least half of the
item's words the message did not bring. Everyday words ("work", "time", "great") are no evidence: a reply says them
whatever it draws on. The usefulness rating (core.turn_learner), when a structured model runs,
adds the uses this lexical test misses (a paraphrase) — those the reply says in other words (`says_in_other_words`;
a weak model calls everything useful).
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from core.config import GroundingSettings
from core.memory.grounding import content_words
from core.protocols import Embedder

CARRIED_SHARE = 0.5  # of an item's own words (those the user's message did not bring) the reply repeats
NOTHING_BESIDES = 0.1  # a unit vector's part off the question's direction below which it only restates the question
# Words a reply says whatever it draws on: repeating one is no sign of a use ("a long day at work" and "I work as a
# nurse"). Generic verbs, adjectives, time words and nouns of everyday talk; topics (family, violin, nurse) are not.
EVERYDAY_WORDS = (
    "time times day days week weeks month months year years today tonight tomorrow yesterday morning evening night "
    "weekend lately recently soon later ago once again ever never maybe perhaps sure yes yeah okay ok thanks thank "
    "please sorry hello hi hey good great nice fine better best bad worse worst big small little long short new old "
    "first last next other another same different few lot lots bit kind sort way part place point thing stuff "
    "something anything everything nothing someone anyone everyone fun easy hard right wrong true real whole own "
    "important happy glad sad interesting lovely amazing awesome wonderful exciting favorite favourite "
    "work works worked working make makes made making get gets got getting go goes went going gone come comes came "
    "coming take takes took taking give gives gave giving know knows knew think thinks thought see sees saw seen "
    "look looks looking want wants wanted need needs needed use used using try tries tried trying feel feels felt "
    "help helps helped helping keep kept let lets put say says tell told ask asked find found start started "
    "keep stay stays stayed enjoy enjoyed love loved hope hoped mean means meant sound sounds seem idea ideas "
    "plan plans planned plenty spend spent done doing able around away together well even enough sometimes "
    "probably definitely especially quick quickly")
EVERYDAY = content_words(EVERYDAY_WORDS)


def drawn_on(user_text: str, reply_text: str, items: Sequence[str]) -> list[bool]:
    """For each context item's text, whether the reply drew on it (see the module's docstring)."""
    asked = content_words(user_text)
    replied = content_words(reply_text) - asked
    own = [_telling(content_words(text) - asked) for text in items]
    holders = Counter(word for words in own for word in words)
    return [_drew_on(words, words & replied, holders) for words in own]


def _telling(words: set[str]) -> set[str]:
    """An item's words that could show a use: all but the everyday ones (all, when it has no other: then only
    half of them repeated is a use)."""
    return (words - EVERYDAY) or words


def _drew_on(own: set[str], carried: set[str], holders: Counter) -> bool:
    if not carried:
        return False
    distinctive = any(holders[word] == 1 for word in carried - EVERYDAY)
    return distinctive or len(carried) >= CARRIED_SHARE * len(own)


def says_in_other_words(user_text: str, reply_text: str, items: Sequence[str], embedder: Embedder,
                        grounding: GroundingSettings) -> list[bool]:
    """For each item, whether the reply carries its content beyond what the user asked: half of the item's own
    words, or its meaning once the question's is taken out of both. A reply to "What am I allergic to?" saying "I'm
    allergic to melatonin." is as close to "I'm allergic to penicillin." as any answer (MiniLM cosine 0.55) because
    both say the question's frame; without the question's direction they are 0.31 apart, a paraphrase 0.6–0.9. An
    oblique one is missed ("you react badly to that family of antibiotics", 0.32): a use not counted costs less
    than a chip that says a contradicting reply drew on the memory. One embedding call for them all."""
    items = list(items)
    if not items or not reply_text.strip():
        return [False] * len(items)
    question, reply, *memories = _unit(np.asarray(embedder.embed([user_text or " ", reply_text, *items]),
                                                  np.float32))
    beyond = reply - float(reply @ question) * question
    asked, replied = content_words(user_text), content_words(reply_text)
    return [_carried(content_words(item) - asked, replied, grounding)
            or _close_beyond(beyond, memory - float(memory @ question) * question, grounding)
            for item, memory in zip(items, memories)]


def _carried(own: set[str], replied: set[str], grounding: GroundingSettings) -> bool:
    return bool(own) and len(own & replied) >= grounding.min_support * len(own)


def _close_beyond(reply: np.ndarray, memory: np.ndarray, grounding: GroundingSettings) -> bool:
    if min(np.linalg.norm(reply), np.linalg.norm(memory)) < NOTHING_BESIDES:
        return False  # one of them says no more than the question: nothing of the item is carried
    return float(_unit(reply) @ _unit(memory)) >= grounding.min_support_cosine


def _unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.maximum(np.linalg.norm(matrix, axis=-1, keepdims=True), 1e-12)
