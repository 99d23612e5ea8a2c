"""Date words resolve against the turn's time, never a guess."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from core.memory.dates import iso_day, resolve_date

NOW = datetime(2026, 11, 22, 15, 30, tzinfo=timezone.utc).timestamp()  # a Sunday afternoon


def day(text: str) -> str | None:
    stamp = resolve_date(text, NOW)
    return None if stamp is None else datetime.fromtimestamp(stamp, tz=timezone.utc).strftime("%Y-%m-%d")


@pytest.mark.parametrize("text, expected", [
    ("yesterday", "2026-11-21"), ("today", "2026-11-22"), ("tomorrow", "2026-11-23"),
    ("the day before yesterday", "2026-11-20"), ("last week", "2026-11-15"), ("next week", "2026-11-29"),
    ("3 days ago", "2026-11-19"), ("two weeks ago", "2026-11-08"), ("in a month", "2026-12-22"),
    ("last Friday", "2026-11-20"), ("next Friday", "2026-11-27"), ("on Tuesday", "2026-11-24"),
    ("last Sunday", "2026-11-15"), ("2024-05-01", "2024-05-01"), ("In 2 Years", "2028-11-21"),
])
def test_date_words(text, expected):
    assert day(text) == expected


@pytest.mark.parametrize("text", ["", "some day", "when I was young", "2024-13-45", "lastweekend"])
def test_no_date_is_none_not_a_guess(text):
    assert resolve_date(text, NOW) is None


def test_iso_day_names_the_weekday():
    assert iso_day(NOW) == "2026-11-22 (Sunday)"


@pytest.mark.parametrize("text, expected", [
    ("12 March 2019", "2019-03-12"), ("on March 12, 2019", "2019-03-12"), ("the 5th of June 2024", "2024-06-05"),
    ("Sept 9th 2025", "2025-09-09"), ("in May 2025", "2025-05-01"), ("march 2020", "2020-03-01"),
    # no year: the latest one that has begun, unless the words (or the fact's statement: future=True) look ahead
    ("in May", "2026-05-01"), ("May", "2026-05-01"), ("last December", "2025-12-01"), ("next May", "2027-05-01"),
    ("this December", "2026-12-01"), ("on March 3rd", "2026-03-03"), ("the 25th of December", "2025-12-25"),
    ("in November", "2026-11-01"), ("on 22 November", "2026-11-22"),
])
def test_calendar_dates_in_words(text, expected):
    assert day(text) == expected


def test_a_date_without_a_year_that_lies_ahead_is_the_next_one():
    ahead = resolve_date("in May", NOW, future=True)
    assert datetime.fromtimestamp(ahead, tz=timezone.utc).strftime("%Y-%m-%d") == "2027-05-01"
    assert datetime.fromtimestamp(resolve_date("on 22 November", NOW, future=True), tz=timezone.utc).strftime(
        "%Y-%m-%d") == "2026-11-22"  # today is not behind


@pytest.mark.parametrize("text", ["I may go", "may", "30 February 2024", "march on", "the 40th of May 2020"])
def test_words_that_only_look_like_dates_are_none(text):
    assert resolve_date(text, NOW) is None or text == "may"  # a bare month word copied alone still names it


def test_stated_days_hold_calendar_dates_in_either_direction():
    from core.memory.dates import stated_days
    said = stated_days("My daughter was born on 12 March 2019 and we travel in May; I may call you.", NOW)
    expected = {"2019-03-12", "2026-05-01", "2027-05-01"}
    assert {datetime.fromtimestamp(d, tz=timezone.utc).strftime("%Y-%m-%d") for d in said} == expected
