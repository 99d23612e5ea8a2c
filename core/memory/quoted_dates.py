"""When a quoted turn was said, and the dates its relative words meant then.

A turn recalled into the context was said on some day; "yesterday", "last week" or "two years ago" in it meant a
date relative to that day, not to today. A model shown the words alone guesses (or takes today), so a recalled
turn is quoted with its day, and each relative date phrase in it with the date it named, as precise as the words
are: a day for "yesterday", "last Friday" or "3 days ago", a month for "last month" or "two months ago", a year for
"last year" or "a few years ago", and a week from the day it was said ("the week before 8 May 2023": no week
convention added). Only the calendar is read (core.memory.dates); a time that hangs on an event ("before the
move") is left to the reader, who now sees each turn's day.
"""
from __future__ import annotations

import re
from datetime import date, datetime, timezone

from core.memory.dates import WEEKDAYS, resolve_date
from core.memory.time_query import SEASONS

_COUNT = r"(?:a few|a couple of|couple of|few|\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten)"
_NUMBERS = {"a few": 3, "a couple of": 2, "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
            "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3}
_SHORT_DAYS = {"mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday", "thu": "thursday",
               "thur": "thursday", "thurs": "thursday", "fri": "friday", "sat": "saturday", "sun": "sunday"}
_SEASONS = ("spring", "summer", "autumn", "fall", "winter")
_PHRASE = re.compile(
    rf"\b(?:the )?(?:day before yesterday|day after tomorrow|yesterday|tomorrow|last night|tonight|"
    rf"this (?:morning|afternoon|evening)|(?:last|next|this) (?:{'|'.join(_SEASONS)})|"
    rf"(?:last|next|this) (?:week(?:end)?|month|year)|{_COUNT} (?:day|week(?:end)?|fortnight|month|year)s? "
    rf"(?:ago|back)|in {_COUNT} (?:day|week|fortnight|month|year)s?|"
    rf"(?:last|next|this) (?:{'|'.join(WEEKDAYS)}|{'|'.join(_SHORT_DAYS)}))\b",
    re.IGNORECASE)


def said_day(timestamp: float) -> str:
    """'8 May 2023': a day as a person writes it."""
    day = datetime.fromtimestamp(timestamp, tz=timezone.utc).date()
    return f"{day.day} {day:%B %Y}"


def dated_text(text: str, said_at: float) -> str:
    """`text` with each relative date phrase followed by the date it named when it was said: 'yesterday (7 May
    2023)'. Text without such a phrase comes back unchanged."""
    return _PHRASE.sub(lambda m: _annotated(m.group(0), said_at), text)


def _annotated(phrase: str, said_at: float) -> str:
    meant = meant_date(phrase, said_at)
    return f"{phrase} ({meant})" if meant else phrase


def meant_date(phrase: str, said_at: float) -> str | None:
    """The date a relative phrase named, said at `said_at`, as precise as its words."""
    words = " ".join(phrase.lower().split()).removeprefix("the ")
    words = " ".join(_SHORT_DAYS.get(word, word) for word in words.split())  # "last fri": "last friday"
    today = datetime.fromtimestamp(said_at, tz=timezone.utc).date()
    if words == "last night":
        return said_day(said_at - 86400.0)
    if words == "tonight" or words.startswith("this ") and words.split()[1] in ("morning", "afternoon", "evening"):
        return said_day(said_at)
    if words.split()[-1] in _SEASONS:
        return _season(words, today)
    unit = next((u for u in ("weekend", "week", "fortnight", "month", "year") if re.search(rf"\b{u}s?\b", words)),
                "day")
    if unit == "day" or words.split()[-1] in WEEKDAYS:
        found = resolve_date(words, said_at)
        return None if found is None else said_day(found)
    if unit in ("week", "weekend", "fortnight"):
        return _weeks(words, unit, said_day(said_at))
    day = _shifted(words, today, unit)
    return f"{day:%B %Y}" if unit == "month" else str(day.year)


def _weeks(words: str, unit: str, said: str) -> str:
    """A week is named from the day it was said, not from a Monday: "last week" said on 20 October 2023 is "the
    week before 20 October 2023" — exactly what the words meant, with no week convention added."""
    if words.startswith(("last", "next", "this")):
        side = {"last": "before", "next": "after", "this": "of"}[words.split()[0]]
        return f"the {unit} {side} {said}"
    count = " ".join(words.split()[:-1]) if words.endswith(("ago", "back")) else words.removeprefix("in ")
    return f"{count} {'before' if words.endswith(('ago', 'back')) else 'after'} {said}"


def _season(words: str, today: date) -> str:
    """"last summer" said on 8 May 2023 is summer 2022 (the latest one over by then); "this summer" the one of
    that year (winter: the one under way or begun that December), "next summer" the first to begin after that day.
    Winter runs December to February."""
    side, name = words.split()
    first, months = SEASONS[name]

    def span(year: int) -> tuple[date, date]:
        end = first - 1 + months
        return date(year, first, 1), date(year + end // 12, end % 12 + 1, 1)
    years = range(today.year - 2, today.year + 2)
    if side == "last":
        year = max(y for y in years if span(y)[1] <= today)
    elif side == "next":
        year = min(y for y in years if span(y)[0] > today)
    else:  # "this summer" in October is the one just over; "this winter" in January the one under way
        year = today.year - 1 if name == "winter" and today.month <= 2 else today.year
    return f"{name} {year}" if name != "winter" else f"winter {year}–{year + 1}"


def _shifted(words: str, today: date, unit: str) -> date:
    count_match = re.match(rf"(?:in )?({_COUNT}) ", words)
    count = 1 if count_match is None else (int(count_match[1]) if count_match[1].isdigit()
                                           else _NUMBERS[count_match[1]])
    sign = 0 if words.startswith("this") else (-1 if words.startswith("last") or words.endswith(("ago", "back"))
                                               else 1)
    if unit == "month":
        months = today.year * 12 + today.month - 1 + sign * count
        return date(months // 12, months % 12 + 1, 1)
    return date(today.year + sign * count, 1, 1)
