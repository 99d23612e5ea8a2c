"""A small deterministic resolver of date words against the time of the turn (UTC days).

"yesterday", "last week", "next Friday", "in 3 days", "2 weeks ago", "2024-05-01", "12 March 2019", "May 2025",
"on March 3rd", "in May"... become the timestamp of the start of that day (of the month, when only a month is
named); anything else resolves to None rather than a guess. A day or month without a year is the latest one that
has begun, or the next one when the words look ahead ("next May", or `future` from the fact's own statement).
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
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH_NAME = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|" \
              r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
_YEAR_NUMBER = r"(?:19|20)\d{2}"
_ORDINAL = r"(?:st|nd|rd|th)?"
MONTH, YEAR, DAY_OF_MONTH = f"({_MONTH_NAME})", f"({_YEAR_NUMBER})", rf"(\d{{1,2}}){_ORDINAL}"
# A named calendar date, the fullest form first: with a year, a month and year, a day and month, a month after a
# word that makes it one ("in May": "I may" is no month).
_CALENDAR = re.compile(
    rf"\b(?:(?P<ld>last|next|this) )?(?:"
    rf"(?P<d1>\d{{1,2}}){_ORDINAL} (?:of )?(?P<m1>{_MONTH_NAME})(?:,? (?P<y1>{_YEAR_NUMBER}))?"
    rf"|(?P<m2>{_MONTH_NAME}) (?P<d2>\d{{1,2}}){_ORDINAL}(?:,? (?P<y2>{_YEAR_NUMBER}))?\b"
    rf"|(?P<m3>{_MONTH_NAME}),? (?P<y3>{_YEAR_NUMBER})"
    rf"|(?:(?P<lm>last|next|this)|in|since|during|until|till|by|from|early|late|mid|of)[ -](?P<m4>{_MONTH_NAME})"
    rf"(?!,? \d)"  # "in May 2025", "in May 3rd": the fuller forms, found from the month on
    rf"|^(?P<m5>{_MONTH_NAME})$)\b")


def month_number(word: str) -> int:
    return next(i for i, name in enumerate(MONTHS, 1) if name.startswith(word[:3].lower()))


def resolve_date(text: str, now: float, *, future: bool = False) -> float | None:
    """The UTC midnight timestamp `text` names relative to `now`, or None when it names no date. `future`: a day
    or month named without a year is the next one, not the latest (the fact it dates lies ahead)."""
    phrase = " ".join(text.lower().strip().split())
    today = datetime.fromtimestamp(now, tz=timezone.utc).date()
    calendar = _CALENDAR.search(phrase)
    day = _absolute(phrase) or (_calendar(calendar, today, future) if calendar else (
        _simple(phrase, today) or _counted(phrase, today) or _weekday(phrase, today)))
    if day is None:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()


def _calendar(match: re.Match, today: date, future: bool) -> date | None:
    """The date a _CALENDAR match names (None when it is no real day: "30 February 2024")."""
    month = next(month_number(match[g]) for g in ("m1", "m2", "m3", "m4", "m5") if match[g])
    named_day = match["d1"] or match["d2"]
    day = int(named_day or 1)
    if match["y1"] or match["y2"] or match["y3"]:
        return _real(int(match["y1"] or match["y2"] or match["y3"]), month, day)
    word = match["ld"] or match["lm"]
    # compared by (month, day), or by month alone when only a month is named ("in November" said in November)
    named, now = ((month, day), (today.month, today.day)) if named_day else ((month,), (today.month,))
    if word == "this":
        year = today.year
    elif word == "next":
        year = today.year if named > now else today.year + 1
    elif word is None and future:
        year = today.year if named >= now else today.year + 1
    elif word == "last" and named == now:
        year = today.year - 1  # "last November", said in November
    else:
        year = today.year if named <= now else today.year - 1
    return _real(year, month, day)


def _real(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


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
    """The days a text names itself ("last week", "on Friday", "2024-05-01", "in May"), as resolve_date gives
    them (a day or month without a year both ways: the statement's tense picks one): a date a model puts on a fact
    must be one of these, not the time of the exchange it was shown."""
    text = " ".join(text.split())
    phrases = [m.group(0) for m in _DATE_PHRASE.finditer(text)] + [m.group(0) for m in _CALENDAR.finditer(text.lower())]
    days = {resolve_date(phrase, now, future=ahead) for phrase in phrases for ahead in (False, True)}
    days.discard(None)
    return days  # type: ignore[return-value]


def iso_day(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d (%A)")
