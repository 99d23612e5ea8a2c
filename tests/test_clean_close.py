"""A store exactly as Engram's last clean close left it opens without reading every page; any change from outside,
a crash's WAL, a copy or a week's wait brings the full check back (core.store.clean_close)."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import apsw
import pytest

from core.errors import StoreCorrupt
from core.store import clean_close, health
from core.store.db import open_db


@pytest.fixture(autouse=True)
def small_stores_stamped(monkeypatch):
    """These stores are small; a real one is stamped from clean_close.STAMP_FROM_BYTES."""
    monkeypatch.setattr(clean_close, "STAMP_FROM_BYTES", 0)


@pytest.fixture
def page_checks(monkeypatch) -> list[bool]:
    """Each full page check open_db runs (PRAGMA quick_check), recorded."""
    ran: list[bool] = []
    real = health.check

    def spy(conn, *, full):
        ran.append(full)
        return real(conn, full=full)

    monkeypatch.setattr(health, "check", spy)
    return ran


def make_store(path: Path, rows: int = 300) -> Path:
    db = open_db(path)
    with db.transaction():
        for n in range(rows):
            db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (f"filler-{n}", "x" * 200))
    db.close()
    return path


def damage(path: Path) -> None:
    page = 4096
    with path.open("r+b") as fh:
        fh.seek((path.stat().st_size // page // 2) * page)
        fh.write(b"\xff" * page)


def test_a_store_closed_cleanly_opens_with_the_cheap_check_only(tmp_path, page_checks):
    path = make_store(tmp_path / "engram.db")
    assert clean_close.last_full_check(path, time.time()) is not None
    page_checks.clear()
    open_db(path).close()
    assert page_checks == []


def test_damage_after_a_clean_close_is_refused_even_with_its_times_put_back(tmp_path, page_checks):
    path = make_store(tmp_path / "engram.db")
    page_checks.clear()
    before = path.stat()
    time.sleep(0.02)  # past the stamp's clock tick: only the file's change time can tell
    damage(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(StoreCorrupt, match="engram doctor"):
        open_db(path)
    assert page_checks == [False]
    assert health.marker_path(path).exists()


def test_damage_right_after_the_close_is_refused(tmp_path):
    path = make_store(tmp_path / "engram.db")
    damage(path)
    with pytest.raises(StoreCorrupt):
        open_db(path)


def test_frames_left_in_the_wal_mean_every_page_is_checked(tmp_path, page_checks):
    """A crash leaves its frames in the WAL; so does a writer that is still running."""
    path = make_store(tmp_path / "engram.db")
    page_checks.clear()
    other = apsw.Connection(str(path))
    other.execute("INSERT INTO meta(key, value) VALUES ('from elsewhere', '1')")
    assert Path(f"{path}-wal").stat().st_size > 0
    open_db(path).close()
    assert page_checks == [False]
    assert not clean_close.stamp_path(path).exists()  # the other writer may change the file: no stamp
    other.close()


def test_only_the_last_connection_to_close_stamps_the_file(tmp_path):
    path = make_store(tmp_path / "engram.db")
    first, second = open_db(path), open_db(path)
    first.execute("INSERT INTO meta(key, value) VALUES ('written', '1')")
    first.close()
    assert not clean_close.stamp_path(path).exists()  # the second one may still write
    second.close()
    assert clean_close.stamp_path(path).exists()


def test_a_copy_and_a_week_old_check_are_checked_in_full(tmp_path, page_checks):
    path = make_store(tmp_path / "engram.db")
    page_checks.clear()
    checked = clean_close.last_full_check(path, time.time())
    assert checked is not None
    assert clean_close.last_full_check(path, checked + clean_close.FULL_CHECK_EVERY + 1) is None
    open_db(path).close()  # the cheap check does not make the last full check newer
    assert clean_close.last_full_check(path, time.time()) == checked
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / "engram.db"
    for source in (path, clean_close.stamp_path(path)):
        shutil.copy2(source, copy.parent / source.name)
    open_db(copy).close()
    assert page_checks == [False]


def test_a_store_found_damaged_while_open_leaves_no_stamp(tmp_path):
    path = make_store(tmp_path / "engram.db")
    db = open_db(path)
    health.mark_damaged(path, "a page went bad")
    db.close()
    assert not clean_close.stamp_path(path).exists()
    with pytest.raises(StoreCorrupt):
        open_db(path)


def test_a_small_store_is_checked_in_full_and_nothing_is_written_beside_it(tmp_path, monkeypatch, page_checks):
    monkeypatch.setattr(clean_close, "STAMP_FROM_BYTES", 32 * 2**20)
    path = make_store(tmp_path / "engram.db")
    open_db(path).close()
    open_db(path).close()
    assert page_checks == [False, False]  # each open after the one that made it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engram.db"]
