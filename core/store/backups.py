"""Backups: written whole or not at all (backup), and purged with the store (a purged text must leave the backups
beside the store too, not only the store itself).

Backups are written before a schema upgrade (core.store.db.backup) in whatever schema that version had, so they
are searched as bytes, the way the purge test searches the live file, and a backup holding a purged text is
deleted whole: it exists to undo a failed upgrade, and a user who purged something wants it gone everywhere.
"""
from __future__ import annotations

import mmap
import os
import time
from pathlib import Path
from typing import Callable, Iterable

import apsw

from core.errors import StoreCorrupt
from core.store import health

PROBE_BYTES = 64  # a record's first bytes always sit on its own page; a longer text overflows to others
BACKUPS_KEPT = 5
PARTIAL = ".partial-"  # a backup being written: ".engram-<stamp>-<label>.db.partial-<pid>" (backup)


def partial_name(target: Path) -> Path:
    return target.with_name(f".{target.name}{PARTIAL}{os.getpid()}")


def clear_partials(folder: Path, process_gone: Callable[[int], bool]) -> list[Path]:
    """Remove the partial copies (and journals) that a backup killed half-way left: those whose process is gone."""
    removed = []
    for leftover in folder.glob(f".engram-*{PARTIAL}*") if folder.is_dir() else ():
        pid = leftover.name.rsplit(PARTIAL, 1)[1].removesuffix("-journal")
        if pid.isdigit() and process_gone(int(pid)):
            leftover.unlink(missing_ok=True)
            removed.append(leftover)
    return removed


def backup_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("engram-*.db")) if folder.is_dir() else []


def remove_backups_holding(folder: Path, texts: Iterable[str]) -> list[Path]:
    """Delete the backups in `folder` whose bytes contain any of `texts`; returns the files removed."""
    probes = {t.encode("utf-8")[:PROBE_BYTES] for t in texts if t and t.strip()}
    removed = []
    for path in backup_files(folder) if probes else []:
        if _holds_any(path, probes):
            for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-journal")):
                leftover.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _holds_any(path: Path, probes: set[bytes]) -> bool:
    """Searched through a memory map: a backup can be as large as the store, hundreds of megabytes."""
    if path.stat().st_size == 0:
        return False
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return any(data.find(probe) >= 0 for probe in probes)


def backup(conn: apsw.Connection, folder: Path, *, label: str = "manual", keep: int = BACKUPS_KEPT) -> Path:
    """Copy the live database with SQLite's backup API into `folder`, keeping the newest `keep` copies.

    The copy is written under a hidden partial name (0600 from its first byte), checked, flushed, and only then
    renamed to `engram-….db`: a kill or a full disk half-way leaves no file that `engram doctor` could take for a
    backup (clear_partials removes what such a kill left)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    clear_partials(folder, process_gone)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    target = folder / f"engram-{stamp}-{label}.db"
    n = 1
    while target.exists():
        target = folder / f"engram-{stamp}-{label}-{n}.db"
        n += 1
    partial = partial_name(target)
    try:
        _copy_into(conn, partial)
        checked = health.check_file(partial, full=False)
        if not checked.ok:
            raise StoreCorrupt(f"the backup Engram just wrote did not pass its check ({checked.summary()}); "
                               "nothing was changed")
        os.replace(partial, target)
    finally:
        for leftover in (partial, Path(f"{partial}-journal")):
            leftover.unlink(missing_ok=True)
    for old in sorted(folder.glob("engram-*.db"), key=lambda p: p.stat().st_mtime)[:-keep]:
        old.unlink(missing_ok=True)
    return target


def _copy_into(conn: apsw.Connection, partial: Path) -> None:
    old_umask = os.umask(0o077)  # the copy and its journal are private from their creation
    try:
        dest = apsw.Connection(str(partial))
    finally:
        os.umask(old_umask)
    try:
        with dest.backup("main", conn, "main") as job:
            while not job.done:
                job.step(-1)
        dest.execute("PRAGMA journal_mode=DELETE")
    finally:
        dest.close()
    fd = os.open(partial, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):  # another user's live process, or no pid at all
        return False
    return False
