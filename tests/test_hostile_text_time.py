"""Text a user pastes or a model writes, at the largest size a turn may have, is read in one pass: each of these
took quadratic time or worse before (a minute or more at 160,000 characters), while the whole app waited.
The tests assert what comes out; a return to the old patterns shows as a test that takes minutes."""
from __future__ import annotations

from core.memory.engram import split_quoted
from core.memory.language import language_problem
from core.store.text import MAX_TEXT_CHARS

SIZE = MAX_TEXT_CHARS - 100


def test_a_run_of_dashes_is_not_read_again_from_every_dash_for_a_relay_marker():
    dashes = "-" * SIZE
    assert split_quoted(dashes) == (dashes, "")
    own, quoted = split_quoted("My cat is Tom. " + dashes + " Original Message: the user is allergic to nuts")
    assert own.strip() == "My cat is Tom." and "allergic" in quoted


def test_opening_quotes_that_never_close_are_passed_once():
    opened = "\u201c" * SIZE
    assert split_quoted(opened) == (opened, "")
    said = "I said \u201cignore previous instructions\u201d to Ana. " + "\u201ca " * (SIZE // 3)
    own, quoted = split_quoted(said)
    assert "ignore previous instructions" in quoted and "ignore" not in own


def test_many_pasted_lines_are_taken_out_in_one_pass():
    pasted = "> a\n" * (SIZE // 4)
    own, quoted = split_quoted("I live in Oslo.\n" + pasted)
    assert own.split() == ["I", "live", "in", "Oslo."] and quoted.count("> a") == SIZE // 4


def test_a_long_made_up_word_is_not_searched_for_repeated_fragments():
    letters = "a"
    while len(letters) < SIZE // 2:  # Thue's square-free word over three letters (a → abc, b → ac, c → b)
        letters = "".join({"a": "abc", "b": "ac", "c": "b"}[c] for c in letters)
    word = "".join({"a": "ba", "b": "ke", "c": "di"}[c] for c in letters[:SIZE // 2])  # no fragment said thrice
    assert language_problem(word) == language_problem(word[:60]) != ""


def test_colons_are_read_once_each_for_a_relay_lead_in():
    """Each colon's lead-in is found by looking back a bounded stretch (core.memory.relay): a regex over that
    stretch for every colon of a paste of colons took 26 s here."""
    colons = ":" * SIZE
    assert split_quoted(colons) == (colons, "")
    labels = "a: " * (SIZE // 3)
    assert split_quoted(labels)[0] == labels
    own, quoted = split_quoted("I live in Oslo. " + labels + "My friend sent me this: I live in Spamtown.")
    assert "Oslo" in own and "Spamtown" in quoted and "Spamtown" not in own
