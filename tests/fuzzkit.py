"""Shared pieces of the property-based fuzz suites: hostile values, and a fingerprint of every row in the store."""
from __future__ import annotations

import hashlib
import math

from hypothesis import settings
from hypothesis import strategies as st

# `pytest --hypothesis-profile=thorough` (CI runs it: .ci/run): every fuzz test at its full example count. The default
# run draws a quarter as many, derandomized as well: the same cases on every machine, in a quarter of the time.
# Registered here, imported by tests/conftest.py: a profile named on the command line must exist before tests load.
THOROUGH = "thorough"
settings.register_profile(THOROUGH)

# Every code point (surrogates included), with the characters attacks are made of drawn more often.
NASTY_CHARS = ["\x00", "\x1b", "\x07", "\r", "\u202e", "\u2066", "\u200b", "\u0301", "\ufeff", "\udcff",
               "<|im_start|>", "<|im_end|>", "<<<", ">>>", "SYSTEM:", "ignore previous instructions", "'", '"',
               "%", "_", "*", "NEAR(", "\\", "🙂", "\n"]
texts = st.one_of(
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60),
    st.lists(st.sampled_from(NASTY_CHARS) | st.text(max_size=5), max_size=12).map("".join),
    st.sampled_from(["", " ", "\t\n", "x" * 200_001, "a" * 4001]),
)
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([0, 1, 0.5, -1, 2**63, 2**63 - 1, 1e300, math.nan, math.inf]),
    st.text(max_size=8), st.none(), st.booleans(),
)
ids = st.one_of(st.integers(min_value=-3, max_value=8), st.sampled_from([2**63 - 1, 2**63, 2**70, -(2**63)]),
                st.text(max_size=6), st.none(), st.floats())


def examples(full: int) -> int:
    """A fuzz test's example count: `full` under the thorough profile, a quarter of it (at least 25) otherwise."""
    return full if settings.get_current_profile_name() == THOROUGH else max(25, full // 4)


def fingerprint(db) -> dict[str, str]:
    """A hash of every row of every ordinary table (the virtual tables' contents live in their shadow tables)."""
    tables = [r["name"] for r in db.query("SELECT name, sql FROM sqlite_schema WHERE type = 'table' "
                                          "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")]
    digest = {}
    for table in tables:
        h = hashlib.sha256()
        for row in db.conn.execute(f'SELECT * FROM "{table}"'):
            h.update(repr(row).encode("utf-8", "surrogatepass"))
        digest[table] = h.hexdigest()
    return digest
