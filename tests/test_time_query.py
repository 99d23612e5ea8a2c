"""The time a question names, read as a window relative to a given now (core.memory.time_query)."""
from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from core.memory.time_query import time_window

NOW = datetime(2023, 11, 22, 15, 30, tzinfo=timezone.utc).timestamp()  # a Wednesday


def _days(question: str, now: float = NOW) -> tuple[date, date]:
    window = time_window(question, now)
    assert window is not None, question
    day = lambda t: datetime.fromtimestamp(t, tz=timezone.utc).date()  # noqa: E731
    return day(window.start), day(window.end)


@pytest.mark.parametrize("question, start, end", [
    ("What dish did Nate make on 9 November, 2022?", date(2022, 11, 9), date(2022, 11, 10)),
    ("What was he working on November 9, 2022?", date(2022, 11, 9), date(2022, 11, 10)),
    ("Which book did Tim finish on 8th December, 2023?", date(2023, 12, 8), date(2023, 12, 9)),
    ("Where was the picture shared on December 1,2023 taken?", date(2023, 12, 1), date(2023, 12, 2)),
    ("What did Nate share in November 2022?", date(2022, 11, 1), date(2022, 12, 1)),
    ("What did I cook in March?", date(2023, 3, 1), date(2023, 4, 1)),
    ("What deal did John get in December?", date(2022, 12, 1), date(2023, 1, 1)),  # December 2023 is yet to come
    ("What charity event happened in 2024?", date(2024, 1, 1), date(2025, 1, 1)),
    ("Where did we go last spring?", date(2023, 3, 1), date(2023, 6, 1)),
    ("What did Joanna photograph last summer?", date(2023, 6, 1), date(2023, 9, 1)),
    ("What did we do in the winter of 2021?", date(2021, 12, 1), date(2022, 3, 1)),
    ("Where was John between August 11 and August 15 2023?", date(2023, 8, 11), date(2023, 8, 16)),
    ("Where was Tim in the week before 16 November 2023?", date(2023, 11, 9), date(2023, 11, 17)),
    ("What did I read last week?", date(2023, 11, 13), date(2023, 11, 20)),
    ("Who called yesterday?", date(2023, 11, 21), date(2023, 11, 22)),
    ("What did I buy last month?", date(2023, 10, 1), date(2023, 11, 1)),
    ("What did I say three weeks ago?", date(2023, 10, 29), date(2023, 11, 5)),  # 1 Nov, ± 3 days
    ("What happened on 30 February, 2023?", date(2023, 2, 1), date(2023, 3, 1)),  # no such day: its month
])
def test_a_named_time_becomes_a_window_relative_to_now(question, start, end):
    assert _days(question) == (start, end)


@pytest.mark.parametrize("question, start, end", [
    ("What is the name of Maria's puppy she got two weeks before August 11, 2023?", date(2023, 7, 27),
     date(2023, 8, 12)),
    ("What was shown on the big screen on the Sunday before October 25, 2022?", date(2022, 10, 23),
     date(2022, 10, 26)),
    ("What did I do the day before 3 May 2023?", date(2023, 5, 2), date(2023, 5, 4)),
    ("What did I do a few days before 9 June 2023?", date(2023, 6, 6), date(2023, 6, 10)),
    ("What did I do the day after 3 May 2023?", date(2023, 5, 4), date(2023, 5, 6)),
    ("What happened the week after May 3, 2023?", date(2023, 5, 4), date(2023, 5, 18)),
    ("Where did we eat the Friday after 3 May 2023?", date(2023, 5, 5), date(2023, 5, 13)),
])
def test_a_time_placed_against_a_date_reaches_from_the_event_to_when_it_was_told(question, start, end):
    """LoCoMo's "two weeks before August 11, 2023" is Maria's "I got a puppy two weeks ago!", said on 11 August:
    the window ran over the anchor day only (the puppy's day was outside it) and "the week before 16 November"
    ended the day before Tim said "last Friday" on the 16th. Told of on the event's day or later, up to the date
    the question names, the turn is inside the window either way."""
    assert _days(question) == (start, end)
    told = datetime(2023, 8, 11, 0, 10, tzinfo=timezone.utc).timestamp()
    puppy = time_window("What is the name of Maria's puppy she got two weeks before August 11, 2023?", NOW)
    assert puppy is not None and puppy.contains(told)


def test_the_window_keeps_the_words_that_named_it_and_holds_its_start_not_its_end():
    window = time_window("What did Ana bake in March?", NOW)
    assert window is not None and window.phrase == "in march"
    assert window.contains(window.start) and not window.contains(window.end)


def test_last_month_and_a_bare_month_move_with_now():
    january = datetime(2024, 1, 10, tzinfo=timezone.utc).timestamp()
    assert _days("What did I buy last month?", january) == (date(2023, 12, 1), date(2024, 1, 1))
    assert _days("What did I cook in March?", january) == (date(2023, 3, 1), date(2023, 4, 1))


@pytest.mark.parametrize("question", [
    "What does Caroline like to paint?",
    "May I ask what Ana's favourite book is?",  # "may" is a verb here
    "What is the name of June's dog?",  # and June a name
    "How many people came to the party?",
    "What did we argue about before the move?",  # the time of an event, not of the calendar
    "Which 2023 plans did he mention?",
    "",
])
def test_a_question_without_a_time_gets_no_window(question):
    assert time_window(question, NOW) is None
