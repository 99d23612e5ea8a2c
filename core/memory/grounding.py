"""Grounding: is what a model wrote supported by what the user said?

A claim (a hypothesis, a learning goal's question, a sentence of a summary) is supported by its evidence when
enough of its content words appear in the evidence — `lexical_support`, the share of the claim's content words
(stop words and hypothesis verbs like "prefers" left out, a light stem so "answers" meets "answer") found in the
evidence — or, with an embedder, when the claim's meaning is close to one piece of evidence (`cosine_support`).
The thresholds live in Settings.grounding. Text in scripts written without spaces (Chinese, Japanese) is
compared by character pairs.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from core.protocols import Embedder

STOP_WORDS = frozenset(
    # English function words, pronouns and the words every claim about a user shares
    "a an the and or but if then so of to in on at by for with from as into about than that this these those "
    "is are was were be been being am do does did doing have has had having will would shall should can could "
    "may might must not no nor very really just also too quite still more most much many some any all each "
    "i me my mine myself you your yours we our us they them their it its he him his she her hers who whom whose "
    "what which when where why how there here user users user's person someone people thing things "
    "prefers prefer preferred likes like seems seem tends tend usually often generally always sometimes "
    "now currently since called named "
    # a few of French, German, Spanish so claims in those languages are not all 'content'
    "le la les un une des de du et est en au aux il elle ils je tu nous vous der die das ein eine und ist zu "
    "den dem des mit el los las y es lo que por para con".split())
_WORD = re.compile(r"\w+", re.UNICODE)
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")  # kana and Han


@dataclass(frozen=True)
class Support:
    lexical: float  # share of the claim's content words found in the evidence
    cosine: float | None  # best cosine of the claim with one evidence text (None without an embedder)

    def passes(self, min_lexical: float, min_cosine: float) -> bool:
        return self.lexical >= min_lexical or (self.cosine is not None and self.cosine >= min_cosine)

    def describe(self) -> str:
        cosine = "" if self.cosine is None else f", meaning {self.cosine:.2f}"
        return f"words {self.lexical:.0%}{cosine}"


def content_words(text: str) -> set[str]:
    """Stems of the words that carry meaning (the first five letters once a plural 's' is gone)."""
    words: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if _UNSPACED.search(word):
            words.update(word[i:i + 2] for i in range(max(len(word) - 1, 1)))
        elif word not in STOP_WORDS and not word.isdigit() and len(word) > 1:
            words.add(_stem(word))
        elif word.isdigit():
            words.add(word)  # "3 kids" is supported by a "3" in the evidence, not by any number
    return words


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:5]


def lexical_support(claim: str, evidence: Iterable[str]) -> float:
    wanted = content_words(claim)
    if not wanted:
        return 0.0  # a claim of stop words alone says nothing the evidence could support
    found: set[str] = set()
    for text in evidence:
        found |= content_words(text)
    return len(wanted & found) / len(wanted)


def cosine_support(embedder: Embedder, claim: str, evidence: Sequence[str]) -> float:
    texts = [t for t in evidence if t.strip()]
    if not texts:
        return 0.0
    matrix = np.asarray(embedder.embed([claim, *texts]), dtype=np.float32)
    unit = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return float((unit[1:] @ unit[0]).max())


def support(claim: str, evidence: Sequence[str], embedder: Embedder | None = None) -> Support:
    lexical = lexical_support(claim, evidence)
    return Support(lexical, None if embedder is None else cosine_support(embedder, claim, evidence))


def reason_counts(reasons: Iterable[str]) -> dict[str, int]:
    """How many items were dropped for each kind of reason, most frequent first (what a report line shows):
    the reason's head, without its details ("not language: starts with a separator" counts as "not language")."""
    return dict(Counter(reason_head(why) for why in reasons).most_common())


def reason_head(why: str) -> str:
    return re.split(r": | \(", why, maxsplit=1)[0]
