"""A reply going round in a loop is noticed (models/repetition.py); a real reply's repetitions are not."""
from __future__ import annotations

from models.repetition import LINE_LIMIT, RepetitionGuard


def _feed(pieces: list[tuple[int, str]]) -> int | None:
    """The index of the piece at which the guard calls it a loop, or None."""
    guard = RepetitionGuard()
    for n, (token, text) in enumerate(pieces):
        if guard.add(token, text):
            return n
    return None


def _words(text: str) -> list[tuple[int, str]]:
    """One 'token' a word (its own id by spelling), as a tokenizer would split them."""
    ids: dict[str, int] = {}
    return [(ids.setdefault(w, len(ids)), w) for w in text.split(" ") for w in [w + " "]]


def test_a_block_said_over_and_over_is_a_loop_soon_after_it_starts():
    pieces = _words("Alejandro," + " a Venezia," * 40)
    stopped = _feed(pieces)
    assert stopped is not None and stopped < 30  # ~a dozen repeats, not the thousand tokens of the limit


def test_the_same_line_a_sixth_time_is_a_loop():
    lines = ["Sí, o mesmo.", "E também não.", "São, não.", "E também não.", "São, não."] * 4
    pieces = [(i, line + "\n") for i, line in enumerate(lines)]  # every piece its own token: no block repeats
    stopped = _feed(pieces)
    assert stopped is not None and lines[:stopped + 1].count(lines[stopped]) == LINE_LIMIT


def test_a_real_reply_with_lists_tables_and_a_refrain_is_not_a_loop():
    reply = ("Here is your week:\n| Day | Plan |\n|---|---|\n|---|---|\n|---|---|\n|---|---|\n"
             "- Monday: swim\n- Tuesday: swim\n- Wednesday: rest\n- Thursday: swim\n"
             "Row, row, row your boat,\nGently down the stream.\nRow, row, row your boat,\n"
             "Merrily, merrily, merrily, merrily,\nLife is but a dream.\n" + "-" * 40 + "\nha ha ha ha\n")
    assert _feed(_words(reply)) is None
    assert _feed([(ord(c), c) for c in reply]) is None  # and one character a token


def test_a_long_program_saying_else_six_times_is_not_a_loop():
    body = "".join(f"if x == {i}:\n    y = {i}\nelse:\n    z = {i}\n    print(z + {i})\n" for i in range(8))
    assert _feed([(n, line + "\n") for n, line in enumerate(body.split("\n"))]) is None
