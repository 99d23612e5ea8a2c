"""Counted nouns in what Engram says: "1 memory", "2 memories", "0 turns" — one rule for every message that counts
something, so none says "1 memories" (the CLI, the panels, the job messages and core's own summaries share it).
"""
from __future__ import annotations

# Nouns Engram counts whose plural no rule below makes.
IRREGULAR = {"hypothesis": "hypotheses", "analysis": "analyses", "person": "people", "child": "children",
             "index": "indexes", "status": "statuses", "bus": "buses"}
VOWELS = set("aeiou")


def plural(noun: str) -> str:
    """The plural of a noun or a noun phrase ("unused memory" -> "unused memories": its last word changes)."""
    head, space, last = noun.rpartition(" ")
    return head + space + _plural_word(last)


def _plural_word(word: str) -> str:
    lower = word.lower()
    if not lower.isalpha():
        return word  # "(sample)", a number, a word with a hyphen or an apostrophe: left as it is
    if lower in IRREGULAR:
        return _same_case(word, IRREGULAR[lower])
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in VOWELS:
        return word[:-1] + _same_case(word[-1], "ies")  # memory -> memories, but day -> days
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return word + _same_case(word[-1], "es")  # match -> matches, box -> boxes
    return word + _same_case(word[-1], "s")


def _same_case(model: str, text: str) -> str:
    return text.upper() if model.isupper() and model.isalpha() else text


def counted(n: int, noun: str, many: str | None = None) -> str:
    """ "1 memory", "3 memories", "0 memories": the number and the noun that agrees with it (`many` when the plural
    is not the noun's own, e.g. counted(n, "memory or episode", "memories and episodes"))."""
    return f"{n} {noun if n == 1 else (many if many is not None else plural(noun))}"
