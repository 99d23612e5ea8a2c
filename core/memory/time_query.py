"""The time a question names, as a window of UTC timestamps: "in March", "on 9 November, 2022", "last
summer", "in 2023", "last week", "between August 11 and August 15 2023".

Recall favours what was said inside the window. A question that names no time gives None, never a guess;
neither does one whose time hangs on an event ("before the move"): only the calendar is read here. A time placed
against a date ("two weeks before 11 August, 2023") reaches from the event to that date, which it was told by.
Single days come from core.memory.dates (its resolver of "yesterday", "3 days ago", "2024-05-01"...).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from core.memory.dates import DAY_OF_MONTH, MONTH, YEAR, month_number, resolve_date

SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}  # start, months
DAY_SECONDS = 86400.0


@dataclass(frozen=True)
class TimeWindow:
    start: float  # UTC timestamp, inclusive
    end: float  # UTC timestamp, exclusive
    phrase: str  # the words of the question that named it

    def contains(self, timestamp: float) -> bool:
        return self.start <= timestamp < self.end


def time_window(question: str, now: float) -> TimeWindow | None:
    """The window of time `question` names, relative to `now` for words like "last week", or None."""
    text = " ".join(question.lower().split())
    today = datetime.fromtimestamp(now, tz=timezone.utc).date()
    for parse in (_between, _day_month_year, _month_year, _season, _month, _year, _relative):
        found = parse(text, today, now)
        if found is not None:
            start, end, phrase = found
            return TimeWindow(_stamp(start), _stamp(end), phrase)
    return None


def _stamp(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()


def _month_span(year: int, month: int, months: int = 1) -> tuple[date, date]:
    end_month = month - 1 + months
    return date(year, month, 1), date(year + end_month // 12, end_month % 12 + 1, 1)


def _valid(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


_DATE_FORMS = (rf"\b{DAY_OF_MONTH} (?:of )?{MONTH}(?:, ?| ){YEAR}\b", rf"\b{MONTH} {DAY_OF_MONTH}(?:, ?| ){YEAR}\b")


def _dates_in(text: str) -> list[tuple[date, str]]:
    """Every full date in the text ("9 November, 2022", "November 9, 2022", "8th of December 2023"), in order."""
    found = []
    for form, day_first in zip(_DATE_FORMS, (True, False)):
        for m in re.finditer(form, text):
            day, month = (m[1], m[2]) if day_first else (m[2], m[1])
            parsed = _valid(int(m[3]), month_number(month), int(day))
            if parsed:
                found.append((m.start(), parsed, m[0]))
    return [(d, phrase) for _, d, phrase in sorted(found)]


def _between(text: str, today: date, now: float):
    """"between August 11 and August 15 2023": the year written once, at the end, serves both days."""
    m = re.search(rf"\bbetween {MONTH} {DAY_OF_MONTH} and {MONTH} {DAY_OF_MONTH},? {YEAR}\b", text)
    if not m:
        return None
    first = _valid(int(m[5]), month_number(m[1]), int(m[2]))
    last = _valid(int(m[5]), month_number(m[3]), int(m[4]))
    if first is None or last is None or last < first:
        return None
    return first, last + timedelta(days=1), m[0]


def _day_month_year(text: str, today: date, now: float):
    dates = _dates_in(text)
    if not dates:
        return None
    day, phrase = dates[0]
    return _anchored(text, day, phrase) or (day, day + timedelta(days=1), phrase)


_SPANS = {"day": 1, "week": 7, "weekend": 7, "fortnight": 14, "month": 30}
_COUNTS = {"the": 1, "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "couple of": 2,
           "few": 3}
_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _anchored(text: str, day: date, phrase: str):
    """A time placed against a date: "two weeks before 11 August, 2023", "the Sunday before October 25, 2022", "the
    day after 3 May 2023". The window runs from the earliest day the event can be to the day it was told: one told
    "before" a date is told by that date at the latest, often on it ("I got a puppy two weeks ago", said on 11
    August), so the anchor day is inside; one "after" a date lies between it and a unit past the event."""
    anchor = re.escape(phrase)
    weekday = re.search(rf"\b({'|'.join(_WEEKDAY_NAMES)}) (before|after) {anchor}", text)
    if weekday:
        wanted = _WEEKDAY_NAMES.index(weekday[1])
        if weekday[2] == "before":
            back = (day.weekday() - wanted - 1) % 7 + 1
            return day - timedelta(days=back), day + timedelta(days=1), weekday[0]
        ahead = (wanted - day.weekday() - 1) % 7 + 1
        return day + timedelta(days=ahead), day + timedelta(days=ahead + 8), weekday[0]
    m = re.search(rf"\b(?:(\d+|{'|'.join(_COUNTS)}) )?(day|weekend|week|fortnight|month)s? "
                  rf"(before|after|leading up to|prior to) {anchor}", text)
    if not m:
        return None
    count = int(m[1]) if m[1] and m[1].isdigit() else _COUNTS.get(m[1] or "the", 1)
    reach = timedelta(days=count * _SPANS[m[2]])
    if m[3] == "after":
        return day + timedelta(days=1), day + reach + timedelta(days=_SPANS[m[2]] + 1), m[0]
    loose = timedelta(days=(reach.days - 1) // 7)  # "three weeks before" is loose by a few days, as "3 weeks ago"
    return day - reach - loose, day + timedelta(days=1), m[0]


def _month_year(text: str, today: date, now: float):
    m = re.search(rf"\b{MONTH},? {YEAR}\b", text)
    if not m:
        return None
    start, end = _month_span(int(m[2]), month_number(m[1]))
    return start, end, m[0]


def _season(text: str, today: date, now: float):
    """"last summer" is the latest summer over before today's season; "summer 2022" / "in the summer" name one."""
    m = re.search(rf"\b(last|this|in the|during the|in|over the)? ?(spring|summer|autumn|fall|winter)"
                  rf"(?: (?:of )?{YEAR})?\b", text)
    if not m or (m[1] is None and m[3] is None):
        return None
    first_month, months = SEASONS[m[2]]
    if m[3]:
        year = int(m[3])
    else:
        year = today.year
        if _month_span(year, first_month, months)[0] > today or (m[1] == "last" and
                                                               _month_span(year, first_month, months)[1] > today):
            year -= 1
    start, end = _month_span(year, first_month, months)
    return start, end, m[0].strip()


def _month(text: str, today: date, now: float):
    """"in March": the latest March that has begun (a month needs a word before it: "may" is also a verb)."""
    m = re.search(rf"\b(?:in|during|of|last|early|late|mid)[ -]{MONTH}\b(?!['’]s)", text)  # not "of May's" (a name)
    if not m:
        return None
    month = month_number(m[1])
    year = today.year if month <= today.month else today.year - 1
    if m[0].startswith("last") and month == today.month:
        year -= 1
    start, end = _month_span(year, month)
    return start, end, m[0]


def _year(text: str, today: date, now: float):
    m = re.search(rf"\b(?:in|during|throughout) {YEAR}\b", text)
    if not m:
        return None
    year = int(m[1])
    return date(year, 1, 1), date(year + 1, 1, 1), m[0]


_RELATIVE = {"last week": 7, "this week": 7, "last month": 31, "last year": 366, "last weekend": 3}


def _relative(text: str, today: date, now: float):
    """Days, weeks, months and years counted back from today ("last week", "3 days ago", "yesterday")."""
    for words, span in _RELATIVE.items():
        if re.search(rf"\b{words}\b", text):
            if words == "last month":
                first = (today.replace(day=1) - timedelta(days=1)).replace(day=1)
                return first, today.replace(day=1), words
            if words == "last year":
                return date(today.year - 1, 1, 1), date(today.year, 1, 1), words
            if words == "this week":
                return today - timedelta(days=today.weekday()), today + timedelta(days=1), words
            return today - timedelta(days=span + today.weekday()), today - timedelta(days=today.weekday()), words
    m = re.search(r"\b(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few) "
                  r"(?:day|week|fortnight|month|year)s? ago\b|\b(?:day before )?yesterday\b", text)
    if not m:
        return None
    day = resolve_date(m[0], now)
    if day is None:
        return None
    found = datetime.fromtimestamp(day, tz=timezone.utc).date()
    slack = 0 if "yesterday" in m[0] else max(1, (today - found).days // 7)  # "3 weeks ago" is loose by days
    return found - timedelta(days=slack), found + timedelta(days=slack + 1), m[0]
