"""Any exception, described in one line a person can act on (the CLI prints it; the GUI shows it)."""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

from core.errors import EngramError

DEBUG_HINT = "set ENGRAM_DEBUG=1 to see the details"


FULL_BELOW = 1024 * 1024  # bytes free: a folder this close to full cannot take a transaction's pages


def disk_full(folder: Path) -> bool:
    try:
        return shutil.disk_usage(folder).free < FULL_BELOW
    except OSError:
        return False


def describe(exc: BaseException, store: Path | None = None) -> tuple[str, bool]:
    """(message, whether it means the store's file — `store` — is damaged)."""
    if isinstance(exc, EngramError):
        return str(exc), False
    import apsw  # only here: the command line starts without it
    if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        from core.store.health import damaged_message
        return damaged_message(store or Path("engram.db"), str(exc)), True
    if isinstance(exc, apsw.BusyError):
        return ("The memory store is busy: another Engram process is writing to it. Nothing was changed; "
                "try again in a moment."), False
    if isinstance(exc, apsw.FullError) or (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) \
            or (isinstance(exc, apsw.Error) and store is not None and disk_full(store.parent)):
        # SQLite reports a full disk met while writing its WAL as a plain "disk I/O error", and the rollback
        # after it as a savepoint error: the free space says what happened
        return "The disk is full: free some space and try again. Nothing was changed.", False
    if isinstance(exc, apsw.IOError):
        return ("The memory file could not be read or written (a disk I/O error); the change was not made. Check "
                "the disk, then try again.", False)
    if isinstance(exc, apsw.ReadOnlyError):
        return "The memory store is read-only here, so nothing could be written.", False
    if isinstance(exc, PermissionError):
        return f"Permission denied: {exc.filename or exc}", False
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}", False
    if isinstance(exc, RecursionError):
        return "The input is nested too deeply to read.", False
    if isinstance(exc, UnicodeError):
        return "The input is not valid UTF-8 text.", False
    if isinstance(exc, MemoryError):
        return "There was not enough memory to finish; nothing was changed.", False
    if isinstance(exc, OverflowError):
        return "A number is too large.", False
    return f"Something went wrong ({type(exc).__name__}: {exc}); {DEBUG_HINT}.", False

