"""Values of the wrong type in the store's own columns (a row edited by hand: created_at = 'yesterday'): SQLite
keeps whatever it is given, and one such value broke every search, show and export that met its row while the
file passed every page check. `engram doctor` finds them (problems) and `--rebuild` repairs them (repair):
a number written as text becomes the number, anything else the column's empty value (NULL where it may be empty,
otherwise the row's other time, or now, for a time, and 0 for a count)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import apsw

NUMERIC = ("INTEGER", "REAL")
SHOWN = 3  # rows named per column in a problem


@dataclass(frozen=True)
class BadColumn:
    table: str
    column: str
    declared: str
    not_null: bool
    rowids: tuple[int, ...]

    def describe(self) -> str:
        ids = ", ".join(str(i) for i in self.rowids[:SHOWN]) + (" …" if len(self.rowids) > SHOWN else "")
        rows = "1 row" if len(self.rowids) == 1 else f"{len(self.rowids)} rows"
        return f"{self.table}.{self.column} holds text where a number belongs in {rows} (row {ids})"


def problems(conn: apsw.Connection) -> list[BadColumn]:
    """Each numeric column holding something else, with its rows; one scan of each table finds them all (a scan
    per column read the 100k memories 17 times: 0.9 s of `engram doctor`)."""
    found = []
    for table, columns in _numeric_columns(conn).items():
        wrong = [f'typeof("{column}") NOT IN (\'integer\', \'real\', \'null\')' for column, _, _ in columns]
        rows = conn.execute(f'SELECT rowid, {", ".join(wrong)} FROM "{table}" WHERE {" OR ".join(wrong)} '
                            "ORDER BY rowid").fetchall()
        for n, (column, declared, not_null) in enumerate(columns, start=1):
            rowids = tuple(int(row[0]) for row in rows if row[n])
            if rowids:
                found.append(BadColumn(table, column, declared, not_null, rowids))
    return found


def repair(conn: apsw.Connection, clock: Callable[[], float] = time.time) -> list[str]:
    """Repair every bad value in one transaction; what was repaired, in words."""
    done = []
    with conn:
        for bad in problems(conn):
            for rowid in bad.rowids:
                value = conn.execute(f'SELECT "{bad.column}" FROM "{bad.table}" WHERE rowid = ?',
                                     (rowid,)).fetchall()[0][0]
                conn.execute(f'UPDATE "{bad.table}" SET "{bad.column}" = ? WHERE rowid = ?',
                             (_repaired(value, bad, clock), rowid))
            done.append(bad.describe().replace("holds text where a number belongs in", "repaired in"))
    return done


def _repaired(value: object, bad: BadColumn, clock: Callable[[], float]) -> object:
    try:
        number = float(str(value).strip())
    except ValueError:
        number = None
    if number is not None and number == number and abs(number) != float("inf"):
        return int(number) if bad.declared == "INTEGER" and number.is_integer() else number
    if not bad.not_null:
        return None
    return clock() if bad.column.endswith("_at") or bad.column.startswith("valid_") else 0


def _numeric_columns(conn: apsw.Connection) -> dict[str, list[tuple[str, str, bool]]]:
    """The numeric columns of the store's ordinary tables (not virtual tables, nor the tables they keep, nor a
    table without rowids: the small key-value ones, read by name)."""
    rows = conn.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'").fetchall()
    virtual = [name for name, sql in rows if (sql or "").upper().startswith("CREATE VIRTUAL")]
    tables = [name for name, sql in rows if name not in virtual and not name.startswith("sqlite_")
              and not any(name.startswith(v + "_") for v in virtual) and "WITHOUT ROWID" not in (sql or "").upper()]
    columns = {}
    for table in tables:
        info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        numeric = [(c[1], str(c[2]).upper(), bool(c[3])) for c in info if str(c[2]).upper() in NUMERIC]
        if numeric:
            columns[table] = numeric
    return columns
