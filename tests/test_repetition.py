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
    assert stopped is not None and lines[:stopped + 1].count(lines[stopped]) <= LINE_LIMIT  # or stale lines first
    spaced = [f"New thought number {n}, said once." for n in range(40)]
    for n in range(0, 40, 3):
        spaced[n] = "E também não."  # every third line: nothing else repeats, so the line rule alone ends it
    stopped = _feed([(n, line + "\n") for n, line in enumerate(spaced)])
    assert stopped is not None and spaced[:stopped + 1].count("E também não.") == LINE_LIMIT


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


RAMBLE = """You forgot to include the 'm5' in the question.
Your sister Ana plays the violin.
Remembering something you didn't tell me, it's not an mistake.
You forgot to add the 'm5' in the question.
Sisters can play many instruments including violins, but it's not a specific instrument.
Remembering your own brother.
Remembering your own brother's favorite music.
Your sister Ana's favorite musical instrument.
Remembering your own sister Ana's favorite music.
You forgot to add the 'm5' in the question.
Sisters can play many instruments including violins, but it's not a specific instrument.
You forgot to add the 'm5' in the question.
Remembering your own sister Ana's favorite music.
Your own sister Ana's favorite musical instrument.
Remembering your own sister Ana's favorite music.
Your own sister Ana's favorite musical instrument.
Remembering your own sister Ana's favorite musical instrument.
Remembering your own sister Ana's favorite musical instrument.
You forgot to add the 'm5' in the question.
Sisters can play many instruments including violins, but it's not a specific instrument.
You forgot to add the 'm5' in the question.
Remembering your own sister Ana's favorite musical instrument.
Your own sister Ana's favorite musical instrument.
"""


def test_lines_that_only_come_round_again_in_a_new_order_are_a_loop():
    # Seen in a real window (SmolLM2-135M, "What instrument does my sister play?"): five lines said again and again
    # in shifting order, no one of them six times in sixteen lines, until the 1,024-token limit
    lines = RAMBLE.splitlines(keepends=True)
    stopped = _feed([(n, line) for n, line in enumerate(lines)])
    assert stopped is not None and stopped < len(lines) - 1


def test_a_song_with_its_chorus_three_times_is_not_a_loop():
    chorus = ["We will walk the long road home,", "under skies of grey and gold,", "we will sing it all again,",
              "till the story has been told."]
    verses = [[f"Verse {v}, line {n}: something new about the {w}." for n, w in enumerate(words)]
              for v, words in enumerate((["sea", "salt", "sails", "storm"], ["town", "tower", "train", "tram"],
                                         ["field", "fence", "fox", "farm"]))]
    song = [line for verse in verses for line in verse + chorus]
    assert _feed([(n, line + "\n") for n, line in enumerate(song)]) is None
