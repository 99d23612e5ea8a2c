"""A small deterministic resolver of date words against the time of the turn (UTC days).

"yesterday", "last week", "next Friday", "in 3 days", "2 weeks ago", "2024-05-01"... become the
timestamp of the start of that day; anything else resolves to None rather than a guess.
"""
from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_UNITS = {"day": 1, "week": 7, "fortnight": 14, "month": 30, "year": 365}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3}
_COUNT = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)"
_UNIT = r"(day|week|fortnight|month|year)s?"


def resolve_date(text: str, now: float) -> float | None:
    """The UTC midnight timestamp `text` names relative to `now`, or None when it names no date."""
    phrase = " ".join(text.lower().strip().split())
    today = datetime.fromtimestamp(now, tz=timezone.utc).date()
    day = _absolute(phrase) or _simple(phrase, today) or _counted(phrase, today) or _weekday(phrase, today)
    if day is None:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()


def _absolute(phrase: str) -> date | None:
    match = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", phrase)
    if not match:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def _simple(phrase: str, today: date) -> date | None:
    table = {"today": 0, "tonight": 0, "now": 0, "yesterday": -1, "day before yesterday": -2, "tomorrow": 1,
             "day after tomorrow": 2, "last week": -7, "next week": 7, "last month": -30, "next month": 30,
             "last year": -365, "next year": 365, "this week": 0}
    for words in sorted(table, key=len, reverse=True):
        if re.search(rf"\b{words}\b", phrase):
            return today + timedelta(days=table[words])
    return None


def _counted(phrase: str, today: date) -> date | None:
    ago = re.search(rf"\b{_COUNT} {_UNIT} ago\b", phrase)
    ahead = re.search(rf"\bin {_COUNT} {_UNIT}\b", phrase)
    match, sign = (ago, -1) if ago else (ahead, 1)
    if not match:
        return None
    count = int(match[1]) if match[1].isdigit() else _NUMBERS[match[1]]
    return today + timedelta(days=sign * count * _UNITS[match[2]])


def _weekday(phrase: str, today: date) -> date | None:
    match = re.search(rf"\b(last|next|this|on)? ?({'|'.join(WEEKDAYS)})\b", phrase)
    if not match:
        return None
    target = WEEKDAYS.index(match[2])
    ahead = (target - today.weekday()) % 7
    if match[1] == "last":
        return today - timedelta(days=(today.weekday() - target) % 7 or 7)
    if match[1] == "next":
        return today + timedelta(days=ahead or 7)
    return today + timedelta(days=ahead)  # "this friday" / "on friday": the coming one (today if today)


_SIMPLE_WORDS = ("day before yesterday", "day after tomorrow", "yesterday", "tomorrow", "today", "tonight", "now",
                 "last week", "next week", "this week", "last month", "next month", "last year", "next year")
_DATE_PHRASE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b{_COUNT} {_UNIT} ago\b|\bin {_COUNT} {_UNIT}\b|"
    rf"\b(?:(?:last|next|this|on) )?(?:{'|'.join(WEEKDAYS)})\b|\b(?:{'|'.join(_SIMPLE_WORDS)})\b", re.IGNORECASE)


def stated_days(text: str, now: float) -> set[float]:
    """The days a text names itself ("last week", "on Friday", "2024-05-01"), as resolve_date gives them: a
    date a model puts on a fact must be one of these, not the time of the exchange it was shown."""
    days = {resolve_date(match.group(0), now) for match in _DATE_PHRASE.finditer(" ".join(text.split()))}
    days.discard(None)
    return days  # type: ignore[return-value]


def iso_day(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d (%A)")
