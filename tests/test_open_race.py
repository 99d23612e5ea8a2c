"""Two processes opening one store at the same moment — a new one (the app and `engram memory add` started together
on a fresh data folder) or one an update must migrate — both open it, and each migration is applied once."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from core.store.db import STAGING_GRACE, open_db, schema_version
from core.store.migrations import LATEST_VERSION, MIGRATIONS, Migration
from tests.processkit import at_once

ROOT = Path(__file__).resolve().parents[1]

# Imports everything, says "ready", waits for "go" on stdin (the barrier), then opens the store.
CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from core.errors import EngramError
    from core.store.db import open_db
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        open_db({path!r}).close()
        print("opened", flush=True)
    except EngramError as exc:
        print("refused: %s" % exc, flush=True)
""")


def _open_at_once(path: Path) -> list[str]:
    """Two processes open a new store at once ("table meta already exists" ended one with a traceback)."""
    return at_once([CHILD.format(root=str(ROOT), path=str(path))] * 2)


def _applied(path: Path) -> list[int]:
    database = open_db(path)
    try:
        assert database.scalar("PRAGMA integrity_check") == "ok"
        return [r["version"] for r in database.query("SELECT version FROM schema_migrations ORDER BY version")]
    finally:
        database.close()


@pytest.mark.parametrize("round_", range(4))
def test_two_processes_creating_a_new_store_at_once_both_open_it(tmp_path, round_):
    path = tmp_path / "data" / "engram.db"
    path.parent.mkdir()
    # was: one child refused "is empty (0 bytes)" (the other had created the file but not written it yet), or
    # failed with "table meta already exists" (both applied the first migration)
    assert _open_at_once(path) == ["opened", "opened"]
    assert _applied(path) == [m.version for m in MIGRATIONS]
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.startswith("engram.db-")) == ["engram.db"]


def test_a_new_store_appears_whole_never_empty_or_half_migrated(tmp_path):
    """While one process creates the store, another looking at the path sees no file or a complete store."""
    path = tmp_path / "engram.db"
    seen: list[int] = []

    def slow_last(conn):
        MIGRATIONS[-1].apply(conn)
        seen.append(path.stat().st_size if path.exists() else -1)  # mid-creation: what another process would find

    open_db(path, migrations=(*MIGRATIONS[:-1], Migration(LATEST_VERSION, MIGRATIONS[-1].name, slow_last))).close()
    assert seen == [-1]
    assert _applied(path) == [m.version for m in MIGRATIONS]


def test_two_connections_upgrading_one_store_apply_each_migration_once(tmp_path):
    path = tmp_path / "engram.db"
    open_db(path, migrations=MIGRATIONS[:-1]).close()  # a store an update must migrate
    inside, release = threading.Event(), threading.Event()
    last = MIGRATIONS[-1]

    def gated(conn):  # the first opener is mid-migration, its first writes made, when the second opens
        last.apply(conn)
        inside.set()
        release.wait(10)

    opened, errors = [], []

    def open_with(migrations) -> None:
        try:
            opened.append(open_db(path, migrations=migrations))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    first = threading.Thread(target=open_with, args=((*MIGRATIONS[:-1], Migration(last.version, last.name, gated)),))
    first.start()
    assert inside.wait(10)
    second = threading.Thread(target=open_with, args=(MIGRATIONS,))
    second.start()
    time.sleep(0.3)  # the second is waiting for the write lock now
    release.set()
    first.join(30)
    second.join(30)
    try:
        assert errors == []
        assert [schema_version(d.conn) for d in opened] == [LATEST_VERSION, LATEST_VERSION]
    finally:
        for database in opened:
            database.close()
    assert _applied(path) == [m.version for m in MIGRATIONS]


def test_on_a_file_system_without_hard_links_the_new_store_is_moved_into_place(tmp_path, monkeypatch):
    import os

    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    path = tmp_path / "engram.db"
    open_db(path).close()
    assert _applied(path) == [m.version for m in MIGRATIONS]
    assert [p.name for p in tmp_path.iterdir()] == ["engram.db"]


def test_a_migration_failing_on_a_new_store_leaves_no_file_behind(tmp_path):
    def broken(conn):
        conn.execute("CREATE TABLE half_done(x)")
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError, match="disk gone"):
        open_db(tmp_path / "engram.db", migrations=(MIGRATIONS[0], Migration(2, "broken", broken)))
    assert list(tmp_path.iterdir()) == []


# Creates the store at {path!r} and stops inside its last migration (the store is mid-creation under its private
# name): says "building", then waits for a line on stdin before finishing.
BUILDER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from core.store.db import open_db
    from core.store.migrations import MIGRATIONS, Migration
    last = MIGRATIONS[-1]
    def held(conn):
        last.apply(conn)
        print("building", flush=True)
        sys.stdin.readline()
    open_db({path!r}, migrations=(*MIGRATIONS[:-1], Migration(last.version, last.name, held))).close()
    print("opened", flush=True)
""")


def _builder(path: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", BUILDER.format(root=str(ROOT), path=str(path))],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "building", child.stderr.read()
    return child


def _staging(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".new-" in p.name)


def _age(folder: Path, seconds: float) -> None:
    """Set every staging file's times `seconds` back, as if it had been left that long ago."""
    then = time.time() - seconds
    for name in _staging(folder):
        os.utime(folder / name, (then, then))


def test_what_a_crash_while_creating_the_store_left_is_cleared_on_the_next_open(tmp_path):
    path = tmp_path / "engram.db"
    child = _builder(path)
    child.kill()  # the process dies mid-creation: its private copy stays behind
    child.wait()
    left = _staging(tmp_path)
    assert left and left[0].startswith(f".engram.db.new-{child.pid}-")
    _age(tmp_path, STAGING_GRACE + 5)
    open_db(path).close()
    assert _staging(tmp_path) == []
    assert _applied(path) == [m.version for m in MIGRATIONS]


def test_a_store_another_live_process_is_building_is_left_to_it(tmp_path):
    path = tmp_path / "engram.db"
    child = _builder(path)
    try:
        building = _staging(tmp_path)
        assert building
        _age(tmp_path, STAGING_GRACE + 5)  # slow, but its process is alive: not ours to clear
        open_db(path).close()  # this process creates the store meanwhile, and sweeps
        assert set(building) <= set(_staging(tmp_path))
    finally:
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=60)
    assert child.returncode == 0 and out.strip() == "opened", err  # it finished, and found this process's store
    assert _staging(tmp_path) == []  # and cleared its own copy
    assert _applied(path) == [m.version for m in MIGRATIONS]
