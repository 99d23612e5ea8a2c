"""The stamp of a clean close: the file exactly as Engram left it, so the next open need not read every page again.

`PRAGMA quick_check` on open reads every page: on a 440 MB store of 100k memories 1–2 s of each CLI verb (about
half of it), though what it looks for is damage done from outside Engram — a failing disk, a stray write, a copy
cut short or restored — since Engram's own writes go through SQLite, which keeps the file sound. So when the
store's last connection closes (its WAL folded back), Engram writes beside it the file's identity (device, inode,
size, modification and change times in nanoseconds) and when every page was last checked. An open that finds the
file so — no WAL holding frames (a crash leaves them), the same identity (any write, even one that puts the
modification time back, moves the change time), the stamp written in a later clock tick than the file's last
change (a change in that same tick would not move its times: "racily clean", as git calls it), the last full
check younger than FULL_CHECK_EVERY — makes only the cheap structural check. Anything else, the full check as
before. Damage a statement meets later is still caught and marked (core.store.health.GuardedCursor), and
`engram doctor` always reads every page.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

SUFFIX = "-clean"  # beside it, named as SQLite names its -wal and -shm
FULL_CHECK_EVERY = 7 * 86400.0  # a file left alone still has every page read once a week (a failing disk)
RACY_RETRIES, TICK = 2, 0.01  # Linux stamps files from a clock of 1–10 ms ticks; a 1–2 s clock stays racy
# Only a store whose full check is dear is stamped (below this it takes ~0.1 s): a small one is checked in full at
# every open as before, and nothing is written beside it.
STAMP_FROM_BYTES = 32 * 2**20


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + SUFFIX)


def last_full_check(path: Path, now: float) -> float | None:
    """When every page of `path` was last checked, if the file is exactly as a clean close left it since then and
    that check is recent; None when the next open must check every page."""
    stamp = stamp_path(path)
    try:
        saved = json.loads(stamp.read_text(encoding="utf-8"))
        written, current = stamp.stat(), path.stat()
    except (OSError, ValueError):
        return None
    checked = saved.get("checked_at") if isinstance(saved, dict) else None
    if _wal_has_frames(path) or saved.get("file") != _identity(current) or not isinstance(checked, (int, float)):
        return None
    if current.st_ctime_ns >= written.st_ctime_ns:  # stamped in the tick of the file's last change: racy
        return None
    return float(checked) if 0 <= now - checked < FULL_CHECK_EVERY else None


def record(path: Path, checked_at: float, *, sleep: Callable[[float], None] = time.sleep) -> None:
    """After the store's last connection of this process closed: stamp the file as clean, or take the stamp away
    while another connection's frames are still in the WAL (it will change the file). Never fails: without a
    stamp the next open checks every page."""
    stamp = stamp_path(path)
    try:
        if _wal_has_frames(path) or path.stat().st_size < STAMP_FROM_BYTES:
            stamp.unlink(missing_ok=True)
            return
        if last_full_check(path, checked_at) == checked_at:
            return  # stamped so already: the file is left as it was found, byte for byte
        for attempt in range(RACY_RETRIES + 1):
            identity = _identity(path.stat())
            _write(stamp, {"file": identity, "checked_at": checked_at})
            if stamp.stat().st_ctime_ns > identity[4] or attempt == RACY_RETRIES:
                return
            sleep(TICK)  # written in the same tick as the file's last change: once more, in the next one
    except OSError:
        pass


def forget(path: Path) -> None:
    try:
        stamp_path(path).unlink(missing_ok=True)
    except OSError:
        pass


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _wal_has_frames(path: Path) -> bool:
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except FileNotFoundError:
        return False
    except OSError:
        return True  # unreadable: as good as unknown


def _write(stamp: Path, data: dict) -> None:
    fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(data))
