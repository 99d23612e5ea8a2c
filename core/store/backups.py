"""Backups and purge: a purged text must leave the backups beside the store too, not only the store itself.

Backups are written before a schema upgrade (core.store.db.backup) in whatever schema that version had, so they
are searched as bytes, the way the purge test searches the live file, and a backup holding a purged text is
deleted whole: it exists to undo a failed upgrade, and a user who purged something wants it gone everywhere.
"""
from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Callable, Iterable

PROBE_BYTES = 64  # a record's first bytes always sit on its own page; a longer text overflows to others


PARTIAL = ".partial-"  # a backup being written: ".engram-<stamp>-<label>.db.partial-<pid>" (core.store.db.backup)


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

