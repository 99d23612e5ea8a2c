"""Validation of text that enters the store: bad input gets a clear error and changes nothing."""
from __future__ import annotations

import math
import unicodedata

from core.errors import InvalidInput

MAX_TIME = 253_402_300_799.0  # 9999-12-31 23:59:59 UTC: the last moment a date can be shown
MAX_INT = 2**63 - 1  # SQLite's largest integer

MAX_TEXT_CHARS = 200_000  # one memory or one turn; larger pastes are refused, not truncated silently


def clean_text(value: object, what: str = "text", *, allow_empty: bool = False,
               max_chars: int = MAX_TEXT_CHARS) -> str:
    """Return `value` as a str fit to store, or raise InvalidInput saying why it is not."""
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{what} is not valid UTF-8 (byte {exc.start})") from None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: how bytes that are not UTF-8 arrive from argv or stdin
        raise InvalidInput(f"{what} is not valid UTF-8 (character {exc.start + 1} is not text)") from None
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL byte")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{what} is empty")
    if not allow_empty and not any(unicodedata.category(c)[0] in "LNPS" for c in value):
        raise InvalidInput(f"{what} is empty: it holds only invisible or combining characters")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} is too long ({len(value):,} characters; the limit is {max_chars:,})")
    return value


def clean_time(value: object, what: str = "time") -> float:
    """A moment as seconds since 1970 (UTC): a finite number between 1970 and the year 9999."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{what} must be a time in seconds since 1970, not {type(value).__name__}")
    if not math.isfinite(value) or not 0 <= value <= MAX_TIME:
        raise InvalidInput(f"{what} must be a time between 1970 and the year 9999, not {value!r}")
    return float(value)
