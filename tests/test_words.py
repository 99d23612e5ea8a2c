"""core.words: a count and its noun agree ("1 memory", "2 memories") for every noun Engram counts."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.words import IRREGULAR, counted, plural


@pytest.mark.parametrize("one, many", [
    ("memory", "memories"), ("episode", "episodes"), ("turn", "turns"), ("fact", "facts"),
    ("summary", "summaries"), ("hypothesis", "hypotheses"), ("day", "days"), ("match", "matches"),
    ("box", "boxes"), ("wish", "wishes"), ("bus", "buses"), ("status", "statuses"), ("person", "people"),
    ("conversation turn", "conversation turns"), ("unused memory", "unused memories"),
    ("new hypothesis", "new hypotheses"), ("history row", "history rows"), ("learning goal", "learning goals"),
    ("graph link", "graph links"), ("upgrade backup", "upgrade backups"), ("file", "files"), ("key", "keys"),
    ("Memory", "Memories"), ("FILE", "FILES"),
])
def test_plural_of_the_nouns_engram_counts(one, many):
    assert plural(one) == many
    assert counted(1, one) == f"1 {one}"
    assert counted(2, one) == f"2 {many}"
    assert counted(0, one) == f"0 {many}"


def test_a_plural_given_by_the_caller_wins():
    assert counted(1, "memory or episode", "memories and episodes") == "1 memory or episode"
    assert counted(7, "memory or episode", "memories and episodes") == "7 memories and episodes"


@pytest.mark.parametrize("odd", ["", "(sample)", "x-ray's", "42", "naïve-word", "🙂"])
def test_a_word_no_rule_fits_is_left_alone(odd):
    assert plural(odd) == odd


@given(st.integers(min_value=-10**6, max_value=10**6), st.from_regex(r"[a-z]{1,12}( [a-z]{1,12})?", fullmatch=True))
def test_one_is_singular_and_every_other_number_plural(n, noun):
    said = counted(n, noun)
    assert said.startswith(f"{n} ")
    words = said.split(" ")[1:]
    assert words[:-1] == noun.split(" ")[:-1]  # only the last word of a phrase changes
    if n == 1:
        assert said == f"1 {noun}"
    else:
        assert said == f"{n} {plural(noun)}" and plural(noun) != noun
        if words[-1] not in IRREGULAR.values():
            assert plural(noun).startswith(noun[:-1])  # the plural keeps the noun's stem


@given(st.text(max_size=30))
def test_plural_never_fails_on_any_text(text):
    assert isinstance(plural(text), str) and isinstance(counted(3, text), str)
