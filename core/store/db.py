"""Open Engram's one SQLite file: apsw + sqlite-vec, WAL, foreign keys, secure_delete, migrations.

The file and its folder are private to the user. Before any migration of an existing file a
backup is written with SQLite's backup API and old backups are rotated away.
"""
from __future__ import annotations

import os
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

import apsw
import sqlite_vec

from core.errors import NotADatabase, SchemaTooNew, StoreBusy, StoreCorrupt, StoreRefused
from core.store import clean_close, health
from core.store.backups import BACKUPS_KEPT, backup, process_gone  # noqa: F401 - backup: callers import it here
from core.store.migrations import BOOKKEEPING, LATEST_VERSION, MIGRATIONS, Migration

Done = TypeVar("Done")  # what a retried transaction returns

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 5000
PENDING_SCRUB = "pending_wal_scrub"  # meta key: a purge could not truncate the WAL yet (see Database.scrub_wal)
BUSY_RETRIES = (0.05, 0.2, 0.5, 1.0, 2.0)  # seconds between whole retries, after each busy timeout ran out
MMAP_BYTES = 1 << 30
# A new store is built under ".<name>.new-<pid>-<ns>" (see _create); a crash leaves that copy behind. Creating a
# store takes well under a second, so a copy whose process is gone is cleared after STAGING_GRACE (not at once: a
# pid from another host or container sharing the folder means nothing here), and any copy after STAGING_STALE
# (its pid may have been reused by a live process since).
STAGING_GRACE = 60.0
STAGING_STALE = 24 * 3600.0


@dataclass
class Database:
    """A connection to the store. Hand it to functions; never keep one in a module global."""

    conn: apsw.Connection
    path: Path
    clock: Callable[[], float] = time.time
    # Data derived from the store and costly to read (vector centroids), kept per connection; each entry
    # carries a stamp read back from the file, so a change made through another connection is seen.
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    busy_pauses: Sequence[float] = BUSY_RETRIES  # see retrying()
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    # When every page of the file was last checked (open_db): a clean close stamps the file with it
    # (core.store.clean_close). None: this connection leaves no stamp (read-only, in memory).
    pages_checked_at: float | None = field(default=None, repr=False, compare=False)

    @contextmanager
    def transaction(self) -> Iterator[apsw.Connection]:
        """One atomic unit; nests as a savepoint.

        The outermost one takes the write lock up front (BEGIN IMMEDIATE): a deferred transaction that read first
        fails at once with "database is locked" when another process committed meanwhile, where an immediate
        one waits its turn for the busy timeout."""
        if self.conn.in_transaction:
            with self.conn:
                yield self.conn
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            with self.conn:
                yield self.conn
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        try:
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def retrying(self, work: Callable[[], Done]) -> Done:
        """Run `work` (one whole transaction); when another writer keeps the store busy past the busy timeout,
        run it again after each of `busy_pauses`, and say so plainly when it never got its turn."""
        for pause in (*self.busy_pauses, None):
            try:
                return work()
            except apsw.BusyError:
                if pause is None or self.conn.in_transaction:  # inside a caller's transaction: theirs to retry
                    break
                self.sleep(pause)
        raise StoreBusy("The memory store is busy: another Engram process is writing to it. Nothing was changed; "
                        "try again in a moment.")

    def execute(self, sql: str, params: Sequence[Any] | dict = ()) -> apsw.Cursor:
        return self.conn.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] | dict = ()) -> list[dict[str, Any]]:
        cursor = self.conn.execute(sql, params)
        try:
            names = [d[0] for d in cursor.getdescription()]
        except apsw.ExecutionCompleteError:  # the statement returned no rows at all
            return []
        return [dict(zip(names, row)) for row in cursor.fetchall()]

    def query_one(self, sql: str, params: Sequence[Any] | dict = ()) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Sequence[Any] | dict = ()) -> Any:
        rows = self.conn.execute(sql, params).fetchall()  # run to the end: no statement is left open
        return rows[0][0] if rows else None

    def now(self) -> float:
        return self.clock()

    def checkpoint(self) -> None:
        """Fold the WAL back into the main file and truncate it."""
        self.conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)

    def scrub_wal(self) -> bool:
        """Truncate the WAL, where older copies of purged pages may linger. While another connection reads, it
        cannot be done: the scrub is then recorded as pending and finished by a later call (every open tries).
        True when the WAL is clean now."""
        try:
            self.checkpoint()
        except apsw.BusyError:
            self.execute("INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT(key) DO UPDATE SET value = '1'",
                         (PENDING_SCRUB,))
            return False
        if self.scalar("SELECT 1 FROM meta WHERE key = ?", (PENDING_SCRUB,)):
            self.execute("DELETE FROM meta WHERE key = ?", (PENDING_SCRUB,))
            self.checkpoint()  # the deletion itself went through the WAL
        return True

    def scrub_pending(self) -> bool:
        return bool(self.scalar("SELECT 1 FROM meta WHERE key = ?", (PENDING_SCRUB,)))

    def schema_version(self) -> int:
        return schema_version(self.conn)

    def close(self) -> None:
        try:
            if self.path.name != ":memory:" and not self.conn.in_transaction and self.scrub_pending():
                self.scrub_wal()  # the reader that held it back may be gone by now
        except apsw.Error:
            pass  # closing must not fail (nor a second close); the next open tries again
        self.conn.close()
        checked, self.pages_checked_at = self.pages_checked_at, None
        if checked is not None:
            if health.marker_path(self.path).exists():
                clean_close.forget(self.path)
            else:
                clean_close.record(self.path, checked)


def open_db(path: Path | str, *, clock: Callable[[], float] = time.time,
            migrations: Sequence[Migration] = MIGRATIONS, backup_dir: Path | None = None,
            read_only: bool = False) -> Database:
    """Open (creating if needed) the store at `path` and bring its schema up to date. `read_only`: an existing
    store the user made read-only, for reading alone (nothing is created, upgraded or written)."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise StoreRefused(f"{path} is a link to {os.readlink(path)}, which does not exist. Engram did not create a "
                           "store there: put the memory file back, or remove the link to start a new store.")
    _refuse_non_sqlite(path)
    if read_only:
        return _open_read_only(path, migrations, clock)
    existed = path.exists()
    if existed:
        health.refuse_if_marked(path)
        _refuse_read_only(path)
    if not path.parent.is_dir():  # a folder Engram makes is private; one that exists keeps its mode
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
    if not existed:
        _create(path, migrations, clock)
    opened_at = time.time()  # the stamp of a clean close is about the file, not the user's data: the real clock
    checked_at = clean_close.last_full_check(path, opened_at) if existed else opened_at  # before a WAL is made
    conn = _connect(path)
    try:
        _check_readable(conn, path)
        health.guard(conn, path)  # from here on, damage met by any statement stops every write
        if existed:
            _refuse_foreign(conn, path)
            if health.check_on_open(conn, path, left_clean=checked_at is not None) or checked_at is None:
                checked_at = opened_at
        latest = migrations[-1].version if migrations else 0
        current = schema_version(conn)
        if current > latest:
            raise SchemaTooNew(
                f"{path} was written by a newer Engram (schema {current}; this version knows up to {latest}). "
                "Update Engram to open it; the file was not changed.")
        _configure(conn)
        pending = [m for m in migrations if m.version > current]
        if pending and existed and current > 0:
            backup(conn, backup_dir or path.parent / "backups", label=f"before-v{pending[0].version}")
        _apply(conn, pending, clock)
    except BaseException:
        conn.close()
        raise
    database = Database(conn=conn, path=path, clock=clock, pages_checked_at=checked_at)
    if database.scrub_pending():
        database.scrub_wal()
    if not existed:
        _make_private(path)  # only what Engram created: a file the user made keeps the mode they gave it
    _clear_stale_staging(path)
    return database


def _open_read_only(path: Path, migrations: Sequence[Migration], clock: Callable[[], float]) -> Database:
    if not path.exists():
        raise StoreRefused(f"There is no memory file at {path} yet, and its folder is read-only.")
    health.refuse_if_marked(path)
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        _load_vec(conn)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        _check_readable(conn, path)
        health.guard(conn, path)
        _refuse_foreign(conn, path)
        health.check_on_open(conn, path)
        latest = migrations[-1].version if migrations else 0
        if schema_version(conn) != latest:
            raise StoreRefused(f"{path} is read-only and its format needs an upgrade, which writes to it; make it "
                               "writable again to open it.")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
    except BaseException:
        conn.close()
        raise
    return Database(conn=conn, path=path, clock=clock)


def store_is_read_only(path: Path) -> bool:
    """The store (or its folder) is read-only."""
    return path.exists() and (_not_writable(path) or _not_writable(path.parent))


def _not_writable(target: Path) -> bool:  # the mode bits too: root passes os.access whatever the mode says
    return not os.access(target, os.W_OK) or not target.stat().st_mode & stat.S_IWUSR


def open_memory_db(*, clock: Callable[[], float] = time.time) -> Database:
    """An in-memory store with the full schema, for tests and benchmarks of logic."""
    conn = apsw.Connection(":memory:")
    _load_vec(conn)
    conn.execute("PRAGMA foreign_keys=ON")
    _apply(conn, list(MIGRATIONS), clock)
    return Database(conn=conn, path=Path(":memory:"), clock=clock)


def schema_version(conn: apsw.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchall()[0][0])


def _refuse_non_sqlite(path: Path) -> None:
    if not path.exists():
        return
    if path.is_dir():
        raise NotADatabase(f"{path} is a folder, not an Engram database file")
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_HEADER))
    if not head:
        raise StoreRefused(f"{path} is empty (0 bytes), where Engram's memory file should be. Engram did not start a "
                           "new one over it: if you never used Engram with this folder, delete the empty file; "
                           "otherwise run `engram doctor` to restore the newest backup.")
    if head != SQLITE_HEADER:
        raise NotADatabase(f"{path} is not an SQLite database; Engram left it untouched")


def _refuse_read_only(path: Path) -> None:
    """A store (or its folder) the user made read-only stays so: Engram never changes permissions it did not set.
    Listing and exporting open it read-only instead (open_db's `read_only`)."""
    if store_is_read_only(path):
        what = path if _not_writable(path) else path.parent
        raise StoreRefused(f"{what} is read-only, so Engram cannot write its memories there; it changed nothing. "
                           "Make it writable again, or choose another data folder.")


def _refuse_foreign(conn: apsw.Connection, path: Path) -> None:
    """Another application's SQLite file: it has tables but not Engram's migration bookkeeping."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'").fetchall()}
    if tables and "schema_migrations" not in tables:
        raise StoreRefused(f"{path} is another application's SQLite database (it has tables Engram did not make); "
                           "Engram left it untouched. Choose a data folder of Engram's own.")


def _connect(path: Path) -> apsw.Connection:
    old_umask = os.umask(0o077)  # the file, its WAL and SHM are created private
    try:
        conn = apsw.Connection(str(path))
    finally:
        os.umask(old_umask)
    _load_vec(conn)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn


def _load_vec(conn: apsw.Connection) -> None:
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)


def _check_readable(conn: apsw.Connection, path: Path) -> None:
    try:
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    except apsw.CorruptError as exc:
        health.mark_damaged(path, str(exc))
        raise StoreCorrupt(health.damaged_message(path, str(exc))) from None
    except apsw.NotADBError as exc:
        health.mark_damaged(path, str(exc))
        raise NotADatabase(f"{path} is not a readable SQLite database ({exc}); Engram left it untouched. "
                           "Run `engram doctor` to restore the newest good backup.") from None


def _configure(conn: apsw.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode survives a process crash; only a power cut can lose the newest commit.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("PRAGMA temp_store=MEMORY")
    # Reads through a memory map: recall touches a few hundred scattered rows of a file far larger than
    # SQLite's 2 MB page cache, and a read() per page cost ~1.5 ms of a 100k-memory recall.
    conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")


def _apply(conn: apsw.Connection, pending: Sequence[Migration], clock: Callable[[], float]) -> None:
    conn.execute(BOOKKEEPING)
    for migration in pending:
        # The write lock first, then the version read again: another process opening the store at the same moment
        # (the app and a CLI verb after an update) may have applied this migration meanwhile.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if schema_version(conn) < migration.version:
                migration.apply(conn)
                conn.execute("INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                             (migration.version, migration.name, clock()))
                conn.execute(f"PRAGMA user_version={int(migration.version)}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _create(path: Path, migrations: Sequence[Migration], clock: Callable[[], float]) -> None:
    """Build a new store whole under a private name beside `path`, then link it into place.

    Another process opening the path at the same moment finds no file or a complete store: never an empty file
    (which it refuses) nor a half-migrated one, and a crash while creating leaves no empty store behind. When another
    process linked its store first, that one is kept."""
    staging = path.with_name(f".{path.name}.new-{os.getpid()}-{time.monotonic_ns()}")
    try:
        conn = _connect(staging)
        try:
            _configure(conn)
            _apply(conn, migrations, clock)
        finally:
            conn.close()  # the last connection: its WAL is folded into the file and removed
        try:
            os.link(staging, path)  # fails if the path exists: never over another process's store
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links (FAT, some network shares): moved instead
            if not path.exists():
                os.replace(staging, path)
    finally:
        for leftover in (staging, Path(f"{staging}-wal"), Path(f"{staging}-shm")):
            leftover.unlink(missing_ok=True)


def _clear_stale_staging(path: Path) -> None:
    """Remove the private copies (and their -wal/-shm) a crash while creating the store left beside it: those
    whose process is gone, or older than STAGING_STALE — never one a live process is still building."""
    prefix = f".{path.name}.new-"
    copies: dict[str, list[Path]] = {}
    try:
        for entry in path.parent.iterdir():
            if entry.name.startswith(prefix):
                copies.setdefault(entry.name.removesuffix("-wal").removesuffix("-shm"), []).append(entry)
    except OSError:
        return  # an unreadable folder: the store itself opened, the leftovers wait for another open
    now = time.time()
    for name, files in copies.items():
        pid, _, stamp = name[len(prefix):].partition("-")
        if not (pid.isdigit() and stamp.isdigit()):
            continue  # not a name _create writes
        try:
            age = now - max(f.stat().st_mtime for f in files)
            if age > STAGING_STALE or (age > STAGING_GRACE and process_gone(int(pid))):
                for f in files:
                    f.unlink(missing_ok=True)
        except OSError:
            continue  # removed meanwhile, or not ours to remove


def _make_private(path: Path) -> None:
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if candidate.exists():
            os.chmod(candidate, 0o600)


__all__ = ["Database", "open_db", "open_memory_db", "backup", "schema_version", "LATEST_VERSION"]
