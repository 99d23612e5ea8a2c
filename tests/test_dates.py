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
