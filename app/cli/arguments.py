"""Argument types for the command line: a number out of range is refused by argparse with a plain message,
before anything opens the store (an id of 2**64 reached SQLite as an OverflowError traceback)."""
from __future__ import annotations

import argparse
import math
from typing import Callable, NoReturn

MAX_ID = 2**63 - 1  # SQLite's largest integer
MAX_COUNT = 100_000


def first_line(error: str | None) -> str:
    """': <the first line of a job's error>', or '' when it has none: a failure said in one line."""
    return f": {error.strip().splitlines()[0]}" if error and error.strip() else ""


def row_id(value: str) -> int:
    """An id as the user types it: 12 or #12."""
    try:
        number = int(str(value).strip().lstrip("#"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an id (ids are whole numbers, e.g. 12)") from None
    if not 1 <= number <= MAX_ID:
        raise argparse.ArgumentTypeError(f"{value!r} is not an id (ids run from 1 to {MAX_ID})")
    return number


def count(low: int = 1, high: int = MAX_COUNT) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"{value!r} is out of range: it must be between {low} and {high:,}")
        return number
    parse.__name__ = "count"
    return parse


def real(low: float, high: float) -> Callable[[str], float]:
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
        if not math.isfinite(number) or not low <= number <= high:
            raise argparse.ArgumentTypeError(f"{value!r} is out of range: it must be between {low:g} and {high:g}")
        return number
    parse.__name__ = "number"
    return parse


class UsageError(Exception):
    """A command line that does not parse: reported in one line, exit status 2."""


class EngramParser(argparse.ArgumentParser):
    """argparse, but a mistake is one `engram: …` line (with where to look) instead of usage text and an exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")
