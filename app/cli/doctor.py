"""`engram doctor`: check the memory file, restore the newest good backup, rebuild what is derived from the rows.

It works on a damaged file that every other command refuses to open: it reads the file directly (read-only for the
check) and never deletes it — a restore moves it aside beside the store.
"""
from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

from app.cli.arguments import UsageError
from core.errors import EngramError
from core.words import counted


def register(subparsers: argparse._SubParsersAction) -> None:
    doctor = subparsers.add_parser("doctor", help="check the memory file; restore a backup or rebuild its indexes")
    action = doctor.add_mutually_exclusive_group()
    action.add_argument("--restore", action="store_true",
                        help="put the newest backup that passes the check in place of a damaged store (the store is "
                             "kept aside)")
    action.add_argument("--rebuild", action="store_true",
                        help="rebuild the full-text and b-tree indexes, the missing vectors and recall's packed "
                             "vectors (for a store that passes the check but searches badly)")
    doctor.add_argument("--force", action="store_true",
                        help="with --restore: replace the store even though it passes its checks")
    doctor.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace, services: Any) -> int:
    path = services.db_path
    if not path.exists():
        print(f"No memory file at {path} yet: nothing to check.")
        return 0
    if args.force and not args.restore:
        raise UsageError("--force goes with --restore")
    if args.restore:
        return _restore(path, force=args.force)
    result = _check(path)
    if args.rebuild:
        return _rebuild(path, services) if result.ok else _refuse_rebuild(path)
    bad_values = _check_values(path) if result.ok else []
    _print_backups(path)
    if not result.ok:  # a failure ends in its one `engram:` line, as every command's does
        raise EngramError("the memory file did not pass its checks; `engram doctor --restore` puts the newest good "
                          "backup in its place")
    if bad_values:
        raise EngramError("some rows hold values of the wrong type; `engram doctor --rebuild` repairs them")
    return 0


def _check(path: Path):
    from core.store import health
    print(f"Checking {path} ({path.stat().st_size / 2**20:.1f} MB) ...")
    result = health.check_file(path)
    if result.ok:
        health.clear_marker(path)
        print("The memory file's pages are sound (integrity_check: ok).")
    else:
        health.mark_damaged(path, result.summary())
        print(f"The memory file is damaged or not a complete Engram store: {result.summary()}")
        print("Engram will not write to it. `engram doctor --restore` puts the newest good backup in its place.")
    return result


def _check_values(path: Path) -> list:
    """Values of the wrong type (core.store.field_types): the pages are sound, the rows are not all readable."""
    import apsw

    from core.store import field_types
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        bad = field_types.problems(conn)
    finally:
        conn.close()
    for column in bad:
        print(f"  {column.describe()}")
    if bad:
        print("Some rows hold values of the wrong type (edited by hand?); `engram doctor --rebuild` repairs them.")
    return bad


def _print_backups(path: Path) -> None:
    from core.store import health
    backups = health.good_backups(path.parent / "backups")
    if not backups:
        print("No backups yet (one is written before every upgrade of the file's format).")
        return
    print("Backups, newest first:")
    for backup, result in backups:
        when = dt.datetime.fromtimestamp(backup.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
        print(f"  {when}  {backup.name}  {'good' if result.ok else 'damaged: ' + result.summary()}")


def _restore(path: Path, *, force: bool) -> int:
    from core.store import health
    current = health.check_file(path)
    if current.ok and not force:
        raise EngramError(f"The memory file {path} passes its checks, so it was left as it is. To replace it with the "
                          "newest good backup anyway, run `engram doctor --restore --force` (it is kept aside).")
    if health.in_use(path):
        raise EngramError("Another Engram process (the app, a chat, an import) has the memory file open; close it, "
                          "then run `engram doctor --restore` again. Nothing was changed.")
    # the newest that passes: the older ones are not read (each check reads its whole copy)
    good = next((backup for backup, result in health.checked_backups(path.parent / "backups") if result.ok), None)
    if good is None:
        raise EngramError(f"There is no backup that passes the check in {path.parent / 'backups'}; the memory file "
                          "was left as it is.")
    aside = health.restore(path, good, damaged=not current.ok)
    print(f"Restored {good.name}. The previous file is kept as {aside.name}: delete it once you are sure.")
    return 0


def _rebuild(path: Path, services: Any) -> int:
    import apsw

    from core.store import field_types, health
    conn = apsw.Connection(str(path))
    try:
        for change in field_types.repair(conn):
            print(f"  {change}")
        done = health.rebuild_indexes(conn)
    finally:
        conn.close()
    repaired, index = _repair_vectors(services)
    print("Rebuilt " + ", ".join(done) + (f"; made {counted(repaired, 'missing vector')}" if repaired else "")
          + (f"; clustered {counted(index.clustered, 'vector table')}" if index.clustered else "")
          + (f"; packed {counted(index.packed, 'vector partition')} for recall" if index.packed else "") + ".")
    return 0


def _repair_vectors(services: Any) -> tuple[int, Any]:
    """Vectors for the rows without one, then recall's packs of them (core.store.vector_packs), made anew."""
    from core.memory.index import repair_missing_vectors
    from core.store import vectors
    repaired = repair_missing_vectors(services.db, services.embedder)
    return repaired, vectors.repack(services.db)


def _refuse_rebuild(path: Path) -> int:
    raise EngramError("a damaged file is not rebuilt in place: restore a backup with `engram doctor --restore`")
