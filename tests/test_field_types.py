"""`engram doctor`'s search for values of the wrong type (core.store.field_types): one scan of each table finds
every bad column with its own rows, whichever other columns of the same rows are bad too."""
from __future__ import annotations

import apsw

from core.store import field_types
from core.store.db import open_db
from core.store.memories import add_memory


def test_each_bad_column_is_named_with_only_its_own_rows(tmp_path):
    path = tmp_path / "engram.db"
    db = open_db(path)
    for n in range(6):
        add_memory(db, f"The user owns bicycle number {n}")
    db.execute("UPDATE memories SET created_at = 'yesterday' WHERE id IN (2, 5)")
    db.execute("UPDATE memories SET access_count = 'many' WHERE id IN (5, 6)")
    db.execute("UPDATE memories SET importance = 0.5, last_access = NULL WHERE id = 3")  # right types: not named
    db.close()
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        found = field_types.problems(conn)
    finally:
        conn.close()
    assert [(b.table, b.column, b.rowids) for b in found] == [("memories", "access_count", (5, 6)),
                                                              ("memories", "created_at", (2, 5))]
    assert found[1].describe() == "memories.created_at holds text where a number belongs in 2 rows (row 2, 5)"


def test_a_sound_store_has_no_problems(tmp_path):
    path = tmp_path / "engram.db"
    db = open_db(path)
    add_memory(db, "The user likes green tea")
    db.close()
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert field_types.problems(conn) == []
    finally:
        conn.close()
